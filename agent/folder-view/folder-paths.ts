import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { TetherError } from '../../core/errors.js';
import { relativePathProblem } from '../../core/protocol/folder-view.js';
import { realPath } from '../policy-paths.js';

/**
 * Where a member's path lands on the agent's disk: inside the session's folder once symlinks
 * are followed (a link pointing out is refused), and inside the agent's `--session-root`s.
 */
export interface FolderScope {
  /** The session's folder. */
  cwd: string;
  /** The agent's `--session-root`s (empty: anywhere). */
  roots: readonly string[];
}

const within = (real: string, dir: string) => real === dir || real.startsWith(dir.endsWith(sep) ? dir : dir + sep);

/** The session folder's real path, if it lies within the agent's roots; PERMISSION_DENIED otherwise. */
export function realFolder(scope: FolderScope): string {
  let real: string;
  try {
    real = realpathSync.native(scope.cwd);
  } catch {
    throw new TetherError('NOT_FOUND', `the session folder ${scope.cwd} no longer exists`);
  }
  if (scope.roots.length > 0 && !scope.roots.some((r) => within(real, realPath(r))))
    throw new TetherError('PERMISSION_DENIED', `the session folder is outside the agent's --session-root folders`);
  return real;
}

/**
 * `rel` resolved under the folder through every symlink (what the kernel would open), refused
 * with PERMISSION_DENIED where it leads out of the folder or its roots. The file need not exist.
 */
export function pathInFolder(scope: FolderScope, rel: string): { real: string; folder: string } {
  const problem = relativePathProblem(rel);
  if (problem) throw new TetherError('INVALID_ARGUMENT', `path "${rel.slice(0, 64)}": ${problem}`);
  const folder = realFolder(scope);
  const real = throughDanglingLinks(realPath(join(folder, rel === '' ? '.' : rel)));
  if (!within(real, folder)) throw new TetherError('PERMISSION_DENIED', `path "${rel}" leads outside the session folder (to ${real})`);
  return { real, folder };
}

/** Symlinks followed at most, as the kernel's ELOOP limit. */
const MAX_LINKS = 40;

/**
 * `realPath` leaves a link whose target does not exist (yet) as written: follow it by hand,
 * so a dangling link that points out is judged by where it would lead once its target appears.
 */
function throughDanglingLinks(path: string): string {
  for (let hops = 0; hops < MAX_LINKS; hops++) {
    const parts = path.split(sep);
    let linked: string | undefined;
    for (let n = 2; n <= parts.length && linked === undefined; n++) {
      const prefix = parts.slice(0, n).join(sep);
      try {
        if (lstatSync(prefix).isSymbolicLink()) linked = join(resolve(dirname(prefix), readlinkSync(prefix)), ...parts.slice(n));
      } catch {
        break; // the rest does not exist: nothing further to follow
      }
    }
    if (linked === undefined) return path;
    path = realPath(linked);
  }
  throw new TetherError('PERMISSION_DENIED', `too many levels of symlinks in ${path}`);
}
