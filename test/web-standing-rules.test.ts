import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openFromDashboard, person, screenshots, sendPrompt, signIn, signInLinkFor, startSession } from './support/browser.js';
import type { TempDir } from './support/claude-cli.js';
import { hasTool } from './support/tools.js';
import { startWebClaudeRig, type WebClaudeRig } from './support/web-claude-rig.js';

/**
 * "Allow for this session" on the web page, against the real Claude Code CLI (scripted model):
 * it grants the rule the engine proposed for that call, shown before the click, listed for
 * every member with who granted it; a different command still asks.
 */
describe.skipIf(!hasTool('chromium'))('web page: allow for this session grants the proposed rule only (real Claude Code CLI)', () => {
  let browser: Browser;
  let cwd: TempDir;
  let state: TempDir;
  let pageUrl: string;
  const linkFor = (sub: string) => signInLinkFor(pageUrl, state.path, sub);

  let rig: WebClaudeRig;
  beforeAll(async () => {
    rig = await startWebClaudeRig('webr', {
      responses: (cwd) => [
        {
          text: 'Logging.',
          tool_use: { id: 'toolu_tee', name: 'Bash', input: { command: 'echo hello | tee log.txt', description: 'log a line' } },
        },
        { text: 'Logged.' },
        {
          text: 'Cleaning up.',
          tool_use: { id: 'toolu_rm', name: 'Bash', input: { command: 'rm keep.txt', description: 'remove a file' } },
        },
        { text: 'Kept it.' },
        {
          text: 'Editing.',
          tool_use: {
            id: 'toolu_edit',
            name: 'Edit',
            input: { file_path: join(cwd, 'keep.txt'), old_string: 'precious', new_string: 'changed' },
          },
        },
        { text: 'Left it.' },
        { text: 'Reading.', tool_use: { id: 'toolu_missing', name: 'Read', input: { path_is_missing: true } } },
        { text: 'Not there.' },
      ],
      files: { 'keep.txt': 'precious\n' },
    });
    ({ browser, cwd, state, pageUrl } = rig);
  }, 60_000);
  afterAll(() => rig?.close());

  it('shows the rule before the click, sends only it, lists it for everyone with who granted it; an rm still asks; a tool error reads without engine markup', async () => {
    const alice = await person(browser);
    await signIn(alice.page, await linkFor('alice'));
    const id = await startSession(alice.page);
    await sendPrompt(alice.page, 'Log hello');
    const card = alice.page.getByTestId('permission-card');
    const allowSession = card.getByRole('button', { name: /for this session/ });
    const label = (await allowSession.textContent())!.trim();
    await allowSession.click();
    await alice.page.getByText('Logged.').waitFor();
    expect(existsSync(join(cwd.path, 'log.txt'))).toBe(true);
    // Each finished turn says what it took (issue 28, item 17): time and tokens, from the engine's result.
    await expect(alice.page.getByTestId('turn-summary').first().textContent()).resolves.toMatch(
      /^\d+\.\d s · \d+(\.\d)?k? tokens read, \d+(\.\d)?k? written/,
    );

    // Another Bash command is not covered: it asks again, and denied, it does not run.
    await sendPrompt(alice.page, 'Clean up');
    await card.filter({ hasText: 'rm keep.txt' }).waitFor();
    await card.getByRole('button', { name: 'Deny', exact: true }).click();
    await alice.page.getByText('Kept it.').waitFor();
    expect(existsSync(join(cwd.path, 'keep.txt'))).toBe(true);

    // The button named the engine's rule for that command before the click, never the bare tool.
    const rule = /^Allow (.+) for this session$/.exec(label)?.[1];
    expect(rule).toMatch(/^Bash\(.+\)$/);
    expect(rule).not.toContain('rm');
    // Every member, also one who came later, sees the standing rule and who granted it.
    const bob = await person(browser);
    await signIn(bob.page, await linkFor('bob'));
    await openFromDashboard(bob.page, id, 'Watch');
    for (const p of [alice.page, bob.page])
      await p
        .getByTestId('standing-rules')
        .filter({ hasText: `${rule} (by alice, for everyone)` })
        .waitFor();
    await screenshots(
      browser,
      'standing-rules',
      () => linkFor('carol'),
      async (page) => {
        await openFromDashboard(page, id, 'Watch');
        await page
          .getByTestId('standing-rules')
          .filter({ hasText: `${rule} (by alice, for everyone)` })
          .waitFor();
        await page.evaluate(() => window.scrollTo(0, 0));
        const box = (await page.getByTestId('standing-rules').boundingBox())!;
        expect(box.y + box.height).toBeLessThanOrEqual(page.viewportSize()!.height); // the list, in sight
      },
    );

    // A call the engine proposed no allow rule for offers no "for this session" button.
    await sendPrompt(alice.page, 'Edit keep.txt');
    await card.filter({ hasText: 'Edit' }).waitFor();
    expect(await card.getByTestId('allow-rule').count()).toBe(0);
    expect(await card.getByRole('button', { name: /for this session/ }).count()).toBe(0);
    await card.getByRole('button', { name: 'Deny', exact: true }).click();
    await alice.page.getByText('Left it.').waitFor();

    // A failed tool's result reads without the engine's markup (issue 28, item 14).
    await sendPrompt(alice.page, 'Read the missing file');
    await alice.page.getByText('Not there.').waitFor();
    const result = (await alice.page.locator('[data-testid=tool-card][data-tool=Read] .result').textContent())!;
    expect(result).not.toContain('tool_use_error');
    expect(result).toMatch(/^Read failed due to the following issues:\nThe required parameter `file_path` is missing/);
    expect(alice.errors).toEqual([]);
    expect(bob.errors).toEqual([]);
    await bob.context.close();
    await alice.context.close();
  }, 120_000);
});
