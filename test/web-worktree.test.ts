import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sendPrompt, startSession } from './support/browser.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { waitFor } from './support/wait.js';
import { webDemoRig } from './support/web-demo-rig.js';

/**
 * The web page's Start form asks for a git worktree (issue 34): with the box ticked and a branch
 * named, the demo engine works in a fresh worktree of the folder's repository, the page says
 * where, and at the stop the worktree it changed is kept; without the box the session works in
 * the folder itself. In headless Chromium against `tether up`.
 */
describe('web page: a session in its own git worktree', () => {
  const rig = webDemoRig('web-worktree');
  const cleanups = cleanupsPerTest();
  const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-C', cwd, ...args], { encoding: 'utf8', timeout: 20_000 }).trim();

  it('the Start form with the worktree box ticked and a branch: the engine writes in the worktree, kept at the stop', async () => {
    const repo = join(realpathSync(cleanups.tempDir('tether-web-wt-').path), 'repo');
    mkdirSync(repo);
    git(repo, 'init', '-q', '-b', 'main');
    writeFileSync(join(repo, 'README'), 'hello\n');
    git(repo, 'add', 'README');
    git(repo, '-c', 'user.email=t@example.com', '-c', 'user.name=T', 'commit', '-q', '-m', 'first');
    const alice = await rig.signedIn('alice', { width: 390 });
    expect(await alice.page.locator('input[name=worktree_branch]').count()).toBe(0); // shown once the box is ticked
    await alice.page.getByLabel('Own git worktree').check();
    await alice.page.fill('input[name=worktree_branch]', 'web/one');
    const id = await startSession(alice.page, { cwd: repo });
    const wt = join(repo, '.tether-worktrees', id);
    await alice.page
      .getByTestId('note')
      .filter({ hasText: `Working in a git worktree at ${wt} (branch web/one` })
      .waitFor();
    expect(git(wt, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('web/one');

    await sendPrompt(alice.page, 'create a file');
    await alice.page.getByTestId('permission-card').getByRole('button', { name: 'Allow', exact: true }).click();
    await waitFor(() => existsSync(join(wt, 'tether-demo.txt')), 15_000, 'the demo engine to write its file in the worktree');
    expect(existsSync(join(repo, 'tether-demo.txt'))).toBe(false);
    alice.page.once('dialog', (d) => void d.accept());
    await alice.page.getByRole('button', { name: 'Stop session' }).click();
    await alice.page
      .getByTestId('note')
      .filter({ hasText: `The worktree at ${wt} (branch web/one) was kept: 1 changed or untracked file` })
      .waitFor();
    expect(readFileSync(join(wt, 'tether-demo.txt'), 'utf8').length).toBeGreaterThan(0);
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  }, 60_000);

  it('without the box the session works in the folder itself', async () => {
    const folder = realpathSync(cleanups.tempDir('tether-web-nowt-').path);
    const alice = await rig.signedIn('alice');
    await startSession(alice.page, { cwd: folder });
    await sendPrompt(alice.page, 'create a file');
    await alice.page.getByTestId('permission-card').getByRole('button', { name: 'Allow', exact: true }).click();
    await waitFor(() => existsSync(join(folder, 'tether-demo.txt')), 15_000, 'the demo engine to write its file in the folder');
    expect(existsSync(join(folder, '.tether-worktrees'))).toBe(false);
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  }, 60_000);
});
