import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  axeViolations,
  openFromDashboard,
  person,
  screenshots,
  sendPrompt,
  signIn,
  signInLinkFor,
  startSession,
} from './support/browser.js';
import { hasTool } from './support/tools.js';
import { startWebClaudeRig, type WebClaudeRig } from './support/web-claude-rig.js';

/** The test's git in the rig's folder (the repository it made; nothing hostile here). */
function git(cwd: string, ...args: string[]): string {
  const r = spawnSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.com', '--no-pager', ...args], { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/**
 * Issue 34 in the web page: the Changes panel of a session whose real CLI edits a git
 * repository. The list and the diff equal git's, it refreshes when an Edit/Write call finishes,
 * it compares with a base branch, a viewer sees it, and at 390 and 1280 px the page never
 * scrolls sideways (screenshots; two of them are in docs/images for the README).
 */
describe.skipIf(!hasTool('chromium'))('web page: the Changes panel (real Claude Code CLI, scripted model)', () => {
  let rig: WebClaudeRig;
  let id: string;

  beforeAll(async () => {
    rig = await startWebClaudeRig('changes', {
      files: { 'notes.txt': 'title = demo\ncolour = red\nsize = 3\n' },
      responses: (cwd) => [
        { text: 'Reading it first.', tool_use: { id: 'toolu_read', name: 'Read', input: { file_path: join(cwd, 'notes.txt') } } },
        {
          text: 'Now the edit.',
          tool_use: {
            id: 'toolu_edit',
            name: 'Edit',
            input: { file_path: join(cwd, 'notes.txt'), old_string: 'colour = red', new_string: 'colour = blue' },
          },
        },
        {
          text: 'And a new file.',
          tool_use: { id: 'toolu_write', name: 'Write', input: { file_path: join(cwd, 'plan.md'), content: '# Plan\n\n- ship it\n' } },
        },
        { text: 'Done.' },
      ],
    });
    const cwd = rig.cwd.path;
    git(cwd, 'init', '-q', '-b', 'main');
    git(cwd, 'add', '.');
    git(cwd, 'commit', '-q', '-m', 'start');
    git(cwd, 'branch', 'base');
    writeFileSync(join(cwd, 'notes.txt'), 'title = demo\ncolour = red\nsize = 3\nshape = round\n');
    git(cwd, 'commit', '-q', '-am', 'a shape on main');
  }, 60_000);
  afterAll(async () => {
    await rig?.close();
  });

  /** The panel's file list as the page shows it: path, counts, marks. */
  const listed = (page: Page) => page.getByTestId('changed-file').allInnerTexts();

  it('lists what the engine changed as git does, refreshed when its Edit and Write finish; a file opens as its diff; a base compares', async () => {
    const alice = await person(rig.browser);
    await signIn(alice.page, await rig.linkFor('alice'));
    id = await startSession(alice.page, { mode: 'acceptEdits' });
    await alice.page.getByTestId('changes-toggle').click();
    await alice.page.getByTestId('changes-summary').filter({ hasText: 'No changes against HEAD' }).waitFor();
    await expect(alice.page.getByTestId('changes-where').textContent()).resolves.toBe('on main');

    await sendPrompt(alice.page, 'Make it blue and write a plan.'); // the panel stays open: no reload by hand below
    await alice.page.getByTestId('changes-summary').filter({ hasText: '2 files changed against HEAD' }).waitFor({ timeout: 90_000 });
    const numstat = git(rig.cwd.path, 'diff', '--numstat', 'HEAD');
    expect(numstat).toBe('1\t1\tnotes.txt\n');
    expect(await listed(alice.page)).toEqual(['notes.txt +1 −1', 'plan.md +3 −0 new']);

    await alice.page.getByTestId('changed-file').filter({ hasText: 'notes.txt' }).click();
    const diff = alice.page.getByTestId('file-diff');
    await diff.locator('.diff .add').first().waitFor();
    const gitLines = git(rig.cwd.path, 'diff', '--no-color', 'HEAD', '--', 'notes.txt').split('\n');
    const plus = gitLines.filter((l) => l.startsWith('+') && !l.startsWith('+++')).map((l) => `+ ${l.slice(1)}`);
    const minus = gitLines.filter((l) => l.startsWith('-') && !l.startsWith('---')).map((l) => `- ${l.slice(1)}`);
    expect(await diff.locator('.diff .add').allInnerTexts()).toEqual(plus);
    expect(await diff.locator('.diff .del').allInnerTexts()).toEqual(minus);
    expect(plus).toEqual(['+ colour = blue']);

    // Against the base branch: notes.txt also differs by the commit made on main since.
    await alice.page.fill('input[name=base]', 'base');
    await alice.page.getByRole('button', { name: 'Compare' }).click();
    await alice.page.getByTestId('changes-summary').filter({ hasText: 'against base' }).waitFor();
    const vsBase = git(rig.cwd.path, 'diff', '--numstat', 'base', '--', 'notes.txt');
    expect(vsBase).toBe('2\t1\tnotes.txt\n');
    await expect.poll(() => listed(alice.page)).toEqual(['notes.txt +2 −1', 'plan.md +3 −0 new']);
    await diff.locator('.diff .add').filter({ hasText: 'shape = round' }).waitFor();
    // A base that is not one is refused with the agent's reason, in sight.
    await alice.page.fill('input[name=base]', '--output=/tmp/x');
    await alice.page.getByRole('button', { name: 'Compare' }).click();
    await alice.page.getByRole('alert').filter({ hasText: 'ref "--output=/tmp/x"' }).waitFor();
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  }, 150_000);

  it('a viewer sees the panel too; at 390 px its tap targets are 44 px and the page never scrolls sideways (screenshots at 390 and 1280 px)', async () => {
    // A long name, which must wrap on a phone rather than push the page sideways.
    writeFileSync(join(rig.cwd.path, 'a-rather-long-file-name-that-would-push-a-phone-page-sideways-if-it-did-not-wrap.txt'), 'x\n');
    const vic = await person(rig.browser, { width: 390 });
    await vic.page.goto(await signInLinkFor(rig.pageUrl, rig.state.path, 'vic', ['view'])); // a view-only sign-in: no Start session
    await openFromDashboard(vic.page, id, 'Watch');
    await vic.page.getByTestId('changes-toggle').click();
    await vic.page.getByTestId('changes-summary').filter({ hasText: '3 files changed against HEAD' }).waitFor();
    await vic.page.getByTestId('changed-file').filter({ hasText: 'notes.txt' }).click();
    await vic.page.getByTestId('file-diff').locator('.diff .add').first().waitFor();
    const small = await vic.page.evaluate(() =>
      [...document.querySelectorAll<HTMLElement>('[data-testid=changes] button, [data-testid=changes] input')]
        .map((el) => ({ t: (el.textContent || el.getAttribute('name') || '').trim().slice(0, 30), ...el.getBoundingClientRect().toJSON() }))
        .filter((b) => b.height < 44 || b.width < 44)
        .map((b) => `${b.t}: ${Math.round(b.width)}x${Math.round(b.height)}`),
    );
    expect(small).toEqual([]);
    expect(await axeViolations(vic.page, 'the Changes panel, 390 px')).toEqual([]);
    await vic.context.close();

    const files = await screenshots(
      rig.browser,
      'web-changes',
      () => rig.linkFor('alice'),
      async (page) => {
        await openFromDashboard(page, id, 'Open');
        await page.getByTestId('changes-toggle').click();
        await page.getByTestId('changed-file').filter({ hasText: 'notes.txt' }).click();
        await page.getByTestId('file-diff').locator('.diff .add').first().waitFor();
        await page.getByTestId('file-diff').locator('.diff .add').first().scrollIntoViewIfNeeded(); // the diff in sight on a phone too
      },
    );
    expect(files).toHaveLength(4); // test-output/screenshots/web-changes-*.png; the README shows two of them, copied to docs/images
  }, 150_000);
});
