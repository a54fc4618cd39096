import { z } from 'zod';

/**
 * A read-only view of a session's folder (issue #34), asked by a member of the session and
 * answered by the agent that runs it: `session.folder` (client → gateway) and `agent.folder`
 * (gateway → agent) carry these, defined once here. What a client names (a ref, a path) is
 * checked here, at every hop, and again on the agent's disk (agent/folder-view/).
 */

/** Most bytes of diff text one answer carries unless the request asks for less (or more, up to the max). */
export const DIFF_DEFAULT_BYTES = 1024 * 1024;
export const DIFF_MAX_BYTES = 8 * 1024 * 1024;
/** Most bytes of one file's content one answer carries, by default and at most. */
export const FILE_DEFAULT_BYTES = 256 * 1024;
export const FILE_MAX_BYTES = 4 * 1024 * 1024;
/** Most changed files, commits and directory entries one answer lists. */
export const FOLDER_LIST_MAX = 2000;
export const LOG_DEFAULT_COMMITS = 20;
export const LOG_MAX_COMMITS = 200;

/**
 * A branch, tag or commit as a person names it: the shape `git check-ref-format` allows
 * (no `..`, `@{`, `//`, no component starting with `.` or ending in `.lock`), starting with a
 * letter or digit (never `-`, so it can never read as an option), with an optional `~N`/`^N` tail.
 */
export function refProblem(ref: string): string | undefined {
  if (ref.length === 0 || ref.length > 256) return 'a ref is 1 to 256 characters';
  const m = /^([A-Za-z0-9][A-Za-z0-9._/+-]*)((?:[~^][0-9]{0,4})*)$/.exec(ref);
  if (!m) return 'a ref starts with a letter or digit and holds letters, digits, . _ / + - (then ~N or ^N)';
  const name = m[1];
  if (name.includes('..') || name.includes('//') || name.endsWith('/') || name.endsWith('.'))
    return 'a ref has no "..", "//" and does not end in "/" or "."';
  if (name.split('/').some((c) => c.startsWith('.') || c.endsWith('.lock'))) return 'no part of a ref starts with "." or ends in ".lock"';
  return undefined;
}

/**
 * A path inside the session's folder, relative to it: no leading `/`, no `..` part, no NUL or
 * newline. `.` (or empty) is the folder itself. The agent still follows symlinks before it reads.
 */
export function relativePathProblem(path: string): string | undefined {
  if (path.length > 4096) return 'a path is at most 4096 characters';
  if (/[\0\n\r]/.test(path)) return 'a path holds no NUL or line break';
  if (path.startsWith('/') || path.startsWith('\\')) return 'a path is relative to the session folder (no leading "/")';
  if (path.split(/[/\\]/).includes('..')) return 'a path may not climb out with ".."';
  return undefined;
}

const Ref = z.string().superRefine((v, ctx) => {
  const problem = refProblem(v);
  if (problem) ctx.addIssue({ code: 'custom', message: `ref "${v.slice(0, 64)}": ${problem}` });
});
const RelPath = z.string().superRefine((v, ctx) => {
  const problem = relativePathProblem(v);
  if (problem) ctx.addIssue({ code: 'custom', message: `path "${v.slice(0, 64)}": ${problem}` });
});

/** What a member asks of the folder. */
export const FolderQuery = z.discriminatedUnion('view', [
  /** Branch, upstream, ahead/behind, and the changed files (staged, unstaged, untracked) with counts against HEAD. */
  z.object({ view: z.literal('status') }).strict(),
  /** The diff of one file (`path`) or of all, against HEAD or `base`; `stat`: counts only, no patch text. */
  z
    .object({
      view: z.literal('diff'),
      path: RelPath.optional(),
      base: Ref.optional(),
      stat: z.boolean().optional(),
      max_bytes: z.number().int().min(1024).max(DIFF_MAX_BYTES).optional(),
    })
    .strict(),
  /** The most recent commits of HEAD. */
  z.object({ view: z.literal('log'), limit: z.number().int().min(1).max(LOG_MAX_COMMITS).optional() }).strict(),
  /** A file's content (capped) or a folder's entries. */
  z.object({ view: z.literal('file'), path: RelPath, max_bytes: z.number().int().min(1).max(FILE_MAX_BYTES).optional() }).strict(),
]);
export type FolderQuery = z.infer<typeof FolderQuery>;

/** How a file stands: `staged` (index vs HEAD), `unstaged` (work tree vs index), `untracked`. */
export const ChangedFile = z.object({
  path: z.string(),
  /** A rename or copy: the path it came from. */
  from: z.string().optional(),
  /** Git's two status letters (index, work tree), `?` for untracked: e.g. `M.`, `.M`, `A.`, `??`. */
  xy: z.string().max(2),
  staged: z.boolean(),
  unstaged: z.boolean(),
  untracked: z.boolean(),
  /** Lines added and deleted against HEAD (untracked: the file's lines); absent for a binary file. */
  added: z.number().int().nonnegative().optional(),
  deleted: z.number().int().nonnegative().optional(),
  binary: z.boolean().optional(),
});
export type ChangedFile = z.infer<typeof ChangedFile>;

/** What was left out because an answer reached its cap, said in words a person reads. */
const Cut = z.string().max(512).optional();

export const FolderStatus = z.object({
  view: z.literal('status'),
  /** The branch checked out; absent when HEAD is detached. */
  branch: z.string().optional(),
  /** HEAD's commit; absent in a repository without commits. */
  head: z.string().optional(),
  upstream: z.string().optional(),
  ahead: z.number().int().nonnegative().optional(),
  behind: z.number().int().nonnegative().optional(),
  files: z.array(ChangedFile),
  cut: Cut,
});
export const FolderDiff = z.object({
  view: z.literal('diff'),
  /** What the work tree was compared with, as asked (`HEAD` or the base), and its commit. */
  base: z.string(),
  base_commit: z.string().optional(),
  files: z.array(
    z.object({
      path: z.string(),
      added: z.number().int().optional(),
      deleted: z.number().int().optional(),
      binary: z.boolean().optional(),
      untracked: z.boolean().optional(),
    }),
  ),
  /** Unified diff text (absent with `stat`); binary files are named by git, never sent. */
  patch: z.string().optional(),
  cut: Cut,
});
export const FolderLog = z.object({
  view: z.literal('log'),
  commits: z.array(z.object({ hash: z.string(), author: z.string(), date: z.string(), subject: z.string() })),
});
export const FolderFile = z.object({
  view: z.literal('file'),
  path: z.string(),
  kind: z.enum(['file', 'dir']),
  size: z.number().int().nonnegative().optional(),
  /** The file's text (UTF-8), up to the cap; absent for a binary file. */
  content: z.string().optional(),
  binary: z.boolean().optional(),
  entries: z
    .array(z.object({ name: z.string(), type: z.enum(['file', 'dir', 'link', 'other']), size: z.number().int().optional() }))
    .optional(),
  cut: Cut,
});
export const FolderResult = z.discriminatedUnion('view', [FolderStatus, FolderDiff, FolderLog, FolderFile]);
export type FolderResult = z.infer<typeof FolderResult>;
export type FolderResultOf<V extends FolderQuery['view']> = Extract<FolderResult, { view: V }>;
