/**
 * A session's git worktree (session option `worktree`, core/protocol/worktree.ts): created when
 * the session starts, in `<repository>/.tether-worktrees/<session id>` (inside the repository's
 * folder, so inside the session roots that let the session use it), and at the end removed when
 * clean or kept, with the reason, when not.
 *
 * Git runs with a fixed argument list (execFile, no shell), `--end-of-options` before every
 * path or name, hooks off, no system config, no prompts, and a bounded time each.
 */
import { execFile } from 'node:child_process';
import { appendFileSync, existsSync, lstatSync, mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { TetherError } from '../core/errors.js';
import { defaultWorktreeBranch, WorktreeBranch, type WorktreeInfo, type WorktreeRequest } from '../core/protocol/worktree.js';
import { checkSessionFolder } from './session-roots.js';

/** The folder, in a repository's top folder, that holds its sessions' worktrees (listed in the repository's info/exclude). */
export const WORKTREES_FOLDER = '.tether-worktrees';

/** Most a `git worktree add` may take (it checks out every file); every other git call gets {@link GIT_TIMEOUT_MS}. */
export const GIT_ADD_TIMEOUT_MS = 120_000;
export const GIT_TIMEOUT_MS = 20_000;

/** Who runs git: the engine's user, so the worktree's files are the engine's. */
export interface GitUser {
  uid?: number;
  gid?: number;
}

/** Where a worktree may go: the agent's session roots (none: anywhere) and its name for messages. */
export interface WorktreePlace {
  roots: readonly string[];
  agent: string;
  user: GitUser;
}

/**
 * Creates the worktree of the repository `cwd` is in for session `sessionId`, on a new branch
 * (the request's, else `tether/<short id>`) at the repository's HEAD. `reuse`: the session goes on
 * after an agent restart, so a worktree already there is its own and is taken as it is.
 * `created` says which (a new one is announced and audited, a reused one was already).
 * Throws FAILED_PRECONDITION (not a repository, no commit yet, a branch that exists),
 * INVALID_ARGUMENT (a branch name git refuses), PERMISSION_DENIED (outside the roots) or ALREADY_EXISTS.
 */
export async function createWorktree(
  cwd: string,
  sessionId: string,
  request: WorktreeRequest,
  place: WorktreePlace,
  reuse: boolean,
): Promise<{ worktree: WorktreeInfo; created: boolean }> {
  // The id names a folder: never a path (ids the gateway makes are UUIDs).
  if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(sessionId))
    throw new TetherError('INVALID_ARGUMENT', `session id ${JSON.stringify(sessionId)} cannot name a worktree folder`);
  const top = realpathSync(
    await git(place.user, cwd, ['rev-parse', '--show-toplevel']).catch((err: Error) => {
      throw new TetherError(
        'FAILED_PRECONDITION',
        `working folder ${cwd} is not in a git repository, so it has no worktree to give (${err.message})`,
      );
    }),
  );
  // The worktree goes under the repository's top folder: that must be inside the roots too.
  checkSessionFolder(
    top,
    place.roots,
    place.agent,
    `--session-root: ${place.roots.join(', ')}; its worktrees go in ${join(top, WORKTREES_FOLDER)}`,
  );
  const branch = await checkedBranch(
    place.user,
    top,
    request === true ? defaultWorktreeBranch(sessionId) : (request.branch ?? defaultWorktreeBranch(sessionId)),
  );
  const container = join(top, WORKTREES_FOLDER);
  const path = join(container, sessionId);
  if (existsSync(path)) {
    if (!reuse) throw new TetherError('ALREADY_EXISTS', `a worktree for session ${sessionId} already exists at ${path}`);
    checkSessionFolder(path, place.roots, place.agent);
    return {
      worktree: { path, branch, base: await branchBase(place.user, top, branch), repository: top, state: 'active' },
      created: false,
    };
  }
  const base = await git(place.user, top, ['rev-parse', '--verify', '--end-of-options', 'HEAD^{commit}']).catch(() => {
    throw new TetherError('FAILED_PRECONDITION', `the repository at ${top} has no commit yet: a worktree starts from one`);
  });
  await makeContainer(place.user, top, container);
  await git(place.user, top, ['worktree', 'add', '-b', branch, '--end-of-options', path, base], GIT_ADD_TIMEOUT_MS).catch((err: Error) => {
    throw new TetherError('FAILED_PRECONDITION', `git could not create the worktree at ${path} on branch ${branch}: ${err.message}`);
  });
  checkSessionFolder(path, place.roots, place.agent); // where it really is, symlinks followed
  return { worktree: { path, branch, base, repository: top, state: 'active' }, created: true };
}

/**
 * Where in the worktree the engine works: the same place relative to the repository's top as
 * `folder` (a session started in `<repo>/pkg/a` works in `<worktree>/pkg/a`), or the worktree's
 * top when that folder is not in the checkout (untracked in the main one).
 */
export function folderInWorktree(wt: WorktreeInfo, folder: string): string {
  const inside = relative(wt.repository, realpathSync(folder));
  if (inside === '' || inside.startsWith('..') || isAbsolute(inside)) return wt.path;
  const mapped = join(wt.path, inside);
  return existsSync(mapped) && lstatSync(mapped).isDirectory() ? mapped : wt.path;
}

/**
 * The session ended: removes its worktree and branch when nothing would be lost (no changed or
 * untracked file, no commit beyond its base), else keeps both. Never throws: a git failure keeps
 * the worktree and says why.
 */
export async function endWorktree(wt: WorktreeInfo, user: GitUser): Promise<WorktreeInfo> {
  const kept = (reason: string): WorktreeInfo => ({ ...wt, state: 'kept', reason });
  try {
    if (!existsSync(wt.path)) return { ...wt, state: 'removed', reason: 'its folder was gone already' };
    const changed = (await git(user, wt.path, ['status', '--porcelain=v1', '--untracked-files=all'])).split('\n').filter(Boolean);
    if (changed.length > 0) return kept(`${changed.length} changed or untracked file${changed.length === 1 ? '' : 's'}`);
    const commits = Number(await git(user, wt.path, ['rev-list', '--count', `${wt.base}..HEAD`, '--']));
    if (commits > 0) return kept(`${commits} commit${commits === 1 ? '' : 's'} beyond ${wt.base.slice(0, 12)}`);
    await git(user, wt.repository, ['worktree', 'remove', '--end-of-options', wt.path]);
    // The branch goes only while it still points at the base: then it holds nothing of the session's.
    const tip = await git(user, wt.repository, ['rev-parse', '--verify', '--end-of-options', `refs/heads/${wt.branch}`]).catch(() => '');
    if (tip === wt.base) await git(user, wt.repository, ['branch', '-D', '--end-of-options', wt.branch]);
    return { ...wt, state: 'removed', reason: undefined };
  } catch (err) {
    return kept(`git could not check or remove it: ${(err as Error).message}`);
  }
}

/** The zod rule and then git's own (`check-ref-format --branch`), so a name never reaches git as an option. */
async function checkedBranch(user: GitUser, top: string, name: string): Promise<string> {
  const parsed = WorktreeBranch.safeParse(name);
  if (!parsed.success)
    throw new TetherError('INVALID_ARGUMENT', `worktree branch ${JSON.stringify(name)}: ${parsed.error.issues[0].message}`);
  await git(user, top, ['check-ref-format', '--branch', name]).catch(() => {
    throw new TetherError('INVALID_ARGUMENT', `worktree branch ${JSON.stringify(name)} is not a valid git branch name`);
  });
  return name;
}

/** The commit a branch was created at: the oldest entry of its reflog (its HEAD when there is none). */
async function branchBase(user: GitUser, top: string, branch: string): Promise<string> {
  const log = await git(user, top, ['reflog', 'show', '--format=%H', '--end-of-options', `refs/heads/${branch}`, '--']).catch(() => '');
  const oldest = log.split('\n').filter(Boolean).at(-1);
  return oldest ?? (await git(user, top, ['rev-parse', '--verify', '--end-of-options', `refs/heads/${branch}`]));
}

/** Makes the worktrees folder (a real folder, never a symlink out) and hides it from the main checkout's `git status`. */
async function makeContainer(user: GitUser, top: string, container: string): Promise<void> {
  if (existsSync(container)) {
    if (!lstatSync(container).isDirectory())
      throw new TetherError(
        'FAILED_PRECONDITION',
        `${container} exists and is not a folder (a symlink is refused: worktrees stay inside the repository)`,
      );
  } else mkdirSync(container);
  const common = await git(user, top, ['rev-parse', '--git-common-dir']);
  const exclude = join(isAbsolute(common) ? common : resolve(top, common), 'info', 'exclude');
  const line = `/${WORKTREES_FOLDER}/`;
  const current = existsSync(exclude) ? readFileSync(exclude, 'utf8') : '';
  if (current.split('\n').includes(line)) return;
  mkdirSync(join(exclude, '..'), { recursive: true });
  appendFileSync(exclude, `${current === '' || current.endsWith('\n') ? '' : '\n'}${line}\n`);
}

/**
 * Runs git in `cwd` with `args` (a fixed list: no shell), hooks and fsmonitor off, no system
 * config, no terminal prompt; resolves with its trimmed stdout, rejects with its stderr's tail.
 */
function git(user: GitUser, cwd: string, args: readonly string[], timeoutMs = GIT_TIMEOUT_MS): Promise<string> {
  const argv = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-C', cwd, ...args];
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LANG: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
  };
  return new Promise((resolveRun, reject) => {
    execFile('git', argv, { env, timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024, uid: user.uid, gid: user.gid }, (err, stdout, stderr) => {
      if (!err) return resolveRun(stdout.trim());
      const why = err.killed ? `timed out after ${timeoutMs} ms` : stderr.trim().slice(-500) || err.message;
      reject(new Error(why));
    });
  });
}
