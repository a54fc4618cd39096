import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { projectFolder } from '../agent/transcript.js';
import type { SessionItem } from '../client/remote-session.js';
import { asTetherError } from '../core/errors.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { startStack, type Stack } from './support/stack.js';
import { runTether } from './support/cli.js';
import { readTurn } from './support/turns.js';
import { waitFor } from './support/wait.js';

/**
 * Issue 32: `session.move` between two agents with separate HOMEs and folders, the real CLI
 * against the scripted model: the transcript goes through the gateway, the target resumes it,
 * and the model's next request carries the conversation held on the first machine.
 */
describe('session.move (real CLI)', () => {
  let stack: Stack | undefined;
  let fake: FakeAnthropic | undefined;
  const agents: Agent[] = [];
  const dirs: TempDir[] = [];
  afterEach(async () => {
    await Promise.all(agents.splice(0).map((a) => a.shutdown(1_000)));
    await stack?.stop();
    await fake?.close();
    for (const d of dirs.splice(0)) d.cleanup();
    stack = fake = undefined;
  });

  /** An agent of its own HOME and folder, running the real CLI. */
  async function machine(name: string): Promise<{ home: string; cwd: string }> {
    const home = makeTempDir(`tether-move-${name}-home-`);
    const cwd = makeTempDir(`tether-move-${name}-cwd-`);
    dirs.push(home, cwd);
    const agent = new Agent({
      gateway: stack!.url,
      name,
      token: await stack!.mint({ kind: 'agent', sub: name, agent: name }),
      engine: 'claude',
      engineCommand: claudeBinaryPath(),
      engineEnv: claudeTestEnv({ home: home.path, baseUrl: fake!.url }),
      cwd: cwd.path,
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
    });
    agents.push(agent);
    await agent.start();
    return { home: home.path, cwd: cwd.path };
  }

  it('moves a session between turns to an agent with another HOME: same session and seqs, the conversation goes on there', async () => {
    fake = await startFakeAnthropic({ responses: [{ text: 'Noted: the word is FIG.' }, { text: 'The word was FIG.' }] });
    stack = await startStack({ engine: 'demo' });
    const alpha = await machine('alpha');
    const beta = await machine('beta');
    const client = await stack.client({ sub: 'alice' });
    const session = await client.createSession({ agent: 'alpha', options: { cwd: alpha.cwd } });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('Remember the word FIG.');
    const first = await readTurn(session, () => undefined, items, 60_000);

    const peer = await client.peer();
    const stranger = await (await stack.client({ sub: 'mallory' })).peer();
    expect(
      await stranger.request('session.move', { session_id: session.id, agent: 'beta' }).then(
        () => undefined,
        (e) => asTetherError(e).code,
      ),
    ).toBe('PERMISSION_DENIED');
    expect(
      await peer.request('session.move', { session_id: session.id, agent: 'gamma' }).then(
        () => undefined,
        (e) => asTetherError(e).code,
      ),
    ).toBe('NOT_FOUND');
    await peer.request('session.move', { session_id: session.id, agent: 'beta', cwd: beta.cwd }, { timeoutMs: 60_000 });
    const info = await client.getSession(session.id);
    expect(info).toMatchObject({ agent: 'beta', options: { cwd: beta.cwd }, state: 'idle' });
    const engineId = String(first.messages.find((m) => m.type === 'system')?.session_id);
    expect(existsSync(join(projectFolder(beta.home, beta.cwd), `${engineId}.jsonl`))).toBe(true);

    await session.sendUserMessage('What was the word?');
    const second = await readTurn(session, () => undefined, items, 90_000);
    expect(second.result.is_error).toBe(false);
    const moved = [...first.items, ...second.items].find(
      (i): i is Extract<SessionItem, { kind: 'event' }> => i.kind === 'event' && i.event.subtype === 'moved',
    );
    expect(moved?.event).toMatchObject({ from_agent: 'alpha', to_agent: 'beta', cwd: beta.cwd, moved_by: 'alice' });
    const asked = fake.modelRequests().filter((r) => JSON.stringify(r.lastMessage ?? '').includes('What was the word?'));
    expect(asked).toHaveLength(1);
    expect(asked[0].raw).toContain('Remember the word FIG.');
    expect(asked[0].raw).toContain('Noted: the word is FIG.');
    const seqs = [...first.items, ...second.items].flatMap((i) => (i.kind === 'reply' ? [] : [i.seq]));
    expect(seqs.every((s, n) => n === 0 || s === seqs[n - 1] + 1)).toBe(true);
    await waitFor(() => agents[0].sessionCount === 0, 10_000, 'the first agent to let the session go');

    // And back, from the terminal: tether move.
    const token = await stack.mint({ kind: 'client', sub: 'alice' });
    const cli = await runTether(['move', session.id, '--agent', 'alpha', '--cwd', alpha.cwd, '--gateway', stack.url, '--token', token], {
      timeoutMs: 60_000,
    });
    expect(cli.stderr).toBe('');
    expect(cli.stdout).toBe(`session ${session.id} now runs on alpha\n`);
    expect(await client.getSession(session.id)).toMatchObject({ agent: 'alpha', options: { cwd: alpha.cwd } });
    fake.setScenario({ responses: [{ text: 'Back home.' }] });
    await session.sendUserMessage('Where are you now?');
    const third = await readTurn(session, () => undefined, items, 90_000);
    expect(third.result.is_error).toBe(false);
    expect(fake.modelRequests().at(-1)!.raw).toContain('The word was FIG.');
  }, 240_000);
});
