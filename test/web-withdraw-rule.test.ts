import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadKeyFile } from '../core/auth/keys.js';
import { AUDIT_FILE } from '../gateway/audit/audit-reader.js';
import { mintToken } from '../core/auth/mint.js';
import { stateKeyPath } from '../core/auth/state-dir.js';
import { openFromDashboard, person, sendPrompt, signIn, signInLinkFor, startSession } from './support/browser.js';
import type { TempDir } from './support/claude-cli.js';
import { rawClient } from './support/raw-client.js';
import { hasTool } from './support/tools.js';
import { startWebClaudeRig, type WebClaudeRig } from './support/web-claude-rig.js';

/** The same command each time (the engine judges a redirect as a file write of its own, so none here), told apart by its description. */
const echo = (id: string, what: string) => ({
  text: `Writing ${what}.`,
  tool_use: { id, name: 'Bash', input: { command: 'touch out.txt', description: `write ${what}` } },
});

/**
 * Withdrawing a standing rule on the web page, against the real Claude Code CLI (scripted
 * model): after the owner withdraws it, the same command asks again, and the engine no longer
 * holds the rule once the next answer removed it; a member who neither owns the session nor
 * granted the rule cannot withdraw it (the gateway refuses, whatever the page shows).
 */
describe.skipIf(!hasTool('chromium'))('web page: withdrawing a standing rule (real Claude Code CLI)', () => {
  let browser: Browser;
  let cwd: TempDir;
  let state: TempDir;
  let pageUrl: string;
  const linkFor = (sub: string) => signInLinkFor(pageUrl, state.path, sub);

  let rig: WebClaudeRig;
  beforeAll(async () => {
    rig = await startWebClaudeRig('webw', {
      responses: [
        echo('toolu_1', 'one'),
        { text: 'One written.' },
        echo('toolu_2', 'two'),
        { text: 'Two written.' },
        echo('toolu_3', 'three'),
        { text: 'Three written.' },
        echo('toolu_4', 'four'),
        { text: 'Four written.' },
      ],
    });
    ({ browser, cwd, state, pageUrl } = rig);
  }, 60_000);
  afterAll(() => rig?.close());

  it('the owner withdraws a rule and the same command asks again; a controller who did not grant it cannot', async () => {
    const alice = await person(browser);
    await signIn(alice.page, await linkFor('alice'));
    const id = await startSession(alice.page);
    const card = alice.page.getByTestId('permission-card');
    await sendPrompt(alice.page, 'Write one');
    await card.getByRole('button', { name: /for this session/ }).click();
    await alice.page.getByText('One written.').waitFor();
    const rules = alice.page.getByTestId('standing-rules');
    const rule = (await rules.locator('code').first().textContent())!;
    expect(rule).toMatch(/^Bash\(touch.*\)$/);

    // The rule stands: the same command runs without asking.
    await sendPrompt(alice.page, 'Write two');
    await alice.page.getByText('Two written.').waitFor();
    expect(await card.count()).toBe(0);
    rmSync(join(cwd.path, 'out.txt'));

    // Bob, a controller who did not grant it, gets no button, and the gateway refuses him anyway.
    const bob = await person(browser);
    await signIn(bob.page, await linkFor('bob'));
    await openFromDashboard(bob.page, id, 'Open');
    await bob.page
      .getByTestId('standing-rules')
      .filter({ hasText: `${rule} (by alice, for everyone)` })
      .waitFor();
    expect(await bob.page.getByRole('button', { name: `Withdraw ${rule}` }).count()).toBe(0);
    const token = await mintToken({ key: loadKeyFile(stateKeyPath(state.path)), kind: 'client', sub: 'bob', ttlSeconds: 600 });
    const raw = await rawClient(pageUrl.replace(/^http/, 'ws'), token);
    try {
      expect((await raw.call('session.attach', JSON.stringify({ session_id: id }))).error).toBeUndefined();
      const refused = await raw.call('session.withdraw_rule', JSON.stringify({ session_id: id, rule }));
      expect(refused.error?.data?.code).toBe('PERMISSION_DENIED');
      expect(refused.error?.message).toContain('only the session owner or alice');
    } finally {
      raw.close();
    }

    // Alice withdraws it: every member sees it go, and the same command asks again.
    await alice.page.getByRole('button', { name: `Withdraw ${rule}` }).click();
    for (const p of [alice.page, bob.page]) await p.getByText(`alice withdrew ${rule}: it asks again`).waitFor();
    expect(await rules.count()).toBe(0);
    await sendPrompt(alice.page, 'Write three');
    await card.filter({ hasText: 'write three' }).waitFor();
    expect(existsSync(join(cwd.path, 'out.txt'))).toBe(false);
    await card.getByRole('button', { name: 'Allow', exact: true }).click(); // this answer removes the rule from the engine
    await alice.page.getByText('Three written.').waitFor();
    rmSync(join(cwd.path, 'out.txt'));

    // Removed from the engine, not only overruled: the next time it asks again too.
    await sendPrompt(alice.page, 'Write four');
    await card.filter({ hasText: 'write four' }).waitFor();
    await card.getByRole('button', { name: 'Deny', exact: true }).click();
    await alice.page.getByText('Four written.').waitFor();
    expect(existsSync(join(cwd.path, 'out.txt'))).toBe(false);

    // Audited: who withdrew what.
    const audit = readFileSync(join(state.path, AUDIT_FILE), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(audit.filter((r) => r.action === 'rule_withdrawn')).toMatchObject([
      { principal: 'bob', rule, result: 'refused', code: 'PERMISSION_DENIED' },
      { principal: 'alice', rule },
    ]);
    expect(audit.filter((r) => r.action === 'rule_withdrawn')[1].result).toBeUndefined();
    expect(alice.errors).toEqual([]);
    expect(bob.errors).toEqual([]);
  }, 150_000);
});
