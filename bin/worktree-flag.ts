import { TetherError } from '../core/errors.js';
import { WorktreeBranch, type WorktreeRequest } from '../core/protocol/worktree.js';
import type { OptionSpec } from './args.js';

/** `--worktree [BRANCH]`, shared by the commands that create sessions. */
export const WORKTREE_OPTION: OptionSpec = { worktree: { type: 'string' } };

/** Its help lines, at the column the commands' help uses; `attached`: the branch only as `--worktree=BRANCH` (a PROMPT follows). */
export function worktreeHelp(attached: boolean): string {
  return `  ${(attached ? '--worktree[=BRANCH]' : '--worktree [BRANCH]').padEnd(23)}  run in a fresh git worktree of the repository --cwd is in (branch
                           BRANCH, default tether/<session>); removed at the end when clean, kept when not`;
}

/** The session option `--worktree` asks for: undefined without it, `true` bare, `{ branch }` with one; INVALID_ARGUMENT for a bad branch. */
export function worktreeOf(value: unknown): WorktreeRequest | undefined {
  if (value === undefined) return undefined;
  if (value === '') return true;
  const branch = WorktreeBranch.safeParse(value);
  if (!branch.success) throw new TetherError('INVALID_ARGUMENT', `--worktree ${JSON.stringify(value)}: ${branch.error.issues[0].message}`);
  return { branch: branch.data };
}
