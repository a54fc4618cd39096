import { z } from 'zod';

/**
 * A session in a fresh git worktree of its folder's repository (issue 34): parallel sessions on
 * one repository each get their own checkout and branch, so they do not trample each other.
 * Defined once here; the agent creates and removes the worktree (agent/worktree.ts), the
 * gateway keeps what it reports on the session and in the audit trail.
 */

/**
 * A branch name a client may ask for: what `git check-ref-format --branch` accepts, narrowed to
 * plain characters and never starting with '-' (so it can never read as an option). The agent
 * asks git itself again before it uses the name.
 */
export const WorktreeBranch = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9._/][A-Za-z0-9._/-]*$/, 'letters, digits, dot, slash, dash and underscore only, not starting with "-"');

/** `worktree` in a create's options: `true` (branch `tether/<session short id>`) or a branch of the client's choosing. */
export const WorktreeRequest = z.union([z.literal(true), z.object({ branch: WorktreeBranch.optional() }).strict()]);
export type WorktreeRequest = z.infer<typeof WorktreeRequest>;

/** Where a session's worktree stands: `active` while the session runs; at its end `removed` (clean) or `kept` (dirty: `reason` says how). */
export const WorktreeState = z.enum(['active', 'removed', 'kept']);

/** A session's worktree as the agent reports it (the `worktree` event) and session info carries it. */
export const WorktreeInfo = z.object({
  /** The worktree's folder on the agent's machine: the engine's working folder. */
  path: z.string().min(1).max(4096),
  branch: z.string().min(1).max(256),
  /** The commit it was created at (the repository's HEAD then). */
  base: z.string().min(1).max(64),
  /** The repository's folder (its main checkout) the worktree belongs to. */
  repository: z.string().min(1).max(4096),
  state: WorktreeState,
  /** Why a worktree was kept (changed files, commits beyond its base) or could not be removed. */
  reason: z.string().max(2048).optional(),
});
export type WorktreeInfo = z.infer<typeof WorktreeInfo>;

/** The default branch of a session's worktree when the client names none. */
export function defaultWorktreeBranch(sessionId: string): string {
  return `tether/${sessionId.replace(/[^A-Za-z0-9]/g, '').slice(0, 8)}`;
}
