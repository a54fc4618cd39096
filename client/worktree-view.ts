import type { WorktreeInfo } from '../core/protocol/worktree.js';

/** One line about a session's worktree, for the terminal (and any client that shows the `worktree` event). */
export function worktreeText(wt: WorktreeInfo): string {
  if (wt.state === 'active') return `Working in a git worktree at ${wt.path} (branch ${wt.branch}, from ${wt.base.slice(0, 12)})`;
  if (wt.state === 'removed') return `The worktree at ${wt.path} was clean: removed, with its branch ${wt.branch}`;
  return `The worktree at ${wt.path} (branch ${wt.branch}) was kept: ${wt.reason ?? 'it holds changes'}`;
}
