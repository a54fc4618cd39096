import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendPrompt, startSession } from './support/browser.js';
import { runTether } from './support/cli.js';
import { startWebDemoRig, type WebDemoRig } from './support/web-demo-rig.js';

/** The web page's Start form picks one of an agent's engines (issue 37): here an ACP agent (test/support/acp-stand-in.mjs) beside the demo engine. */
describe('web page: Start with an engine', () => {
  let rig: WebDemoRig;
  beforeAll(async () => {
    const standIn = `${process.execPath} ${resolve('test/support/acp-stand-in.mjs')}`;
    rig = await startWebDemoRig('web-acp', ['--engine', 'acp', '--engine-command', standIn]);
  }, 60_000);
  afterAll(() => rig?.close());

  it("offers the agent's engines; the chosen one runs the session and the page shows its turn", async () => {
    const alice = await rig.signedIn('alice');
    const select = alice.page.locator('select[name=engine]');
    await expect
      .poll(() => select.locator('option').allTextContents(), { timeout: 15_000 })
      .toEqual(["the agent's default (demo)", 'demo', 'acp']);
    const id = await startSession(alice.page, { engine: 'acp' });
    await sendPrompt(alice.page, 'hello page');
    await alice.page.getByText('echo: hello page').first().waitFor({ timeout: 30_000 });
    await alice.page.getByText('Note: stand-in cannot load sessions').first().waitFor({ timeout: 10_000 });
    const printed = (key: string) => new RegExp(`^${key}: (\\S+)$`, 'm').exec(rig.up.stdout())?.[1] ?? '';
    const sessions = await runTether(['sessions', '--json'], {
      env: { TETHER_GATEWAY: printed('gateway'), TETHER_TOKEN: printed('token') },
    });
    expect((JSON.parse(sessions.stdout) as Array<{ id: string; engine: string }>).find((s) => s.id === id)?.engine).toBe('acp');
    // tether run says it too, and shows the turn.
    const run = await runTether(['run', '--engine', 'acp', 'hi run'], {
      env: { TETHER_GATEWAY: printed('gateway'), TETHER_TOKEN: printed('token'), TETHER_AGENT: 'local' },
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('echo: hi run');
    expect(run.stderr).toContain('Note: stand-in cannot load sessions (ACP loadSession): this session ends if its agent restarts');
  }, 90_000);
});
