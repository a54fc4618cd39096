import { chmodSync, closeSync, constants, fchmodSync, fstatSync, mkdirSync, openSync, statSync } from 'node:fs';
import { TetherError } from '../errors.js';

/** Mode of a folder holding secrets or evidence (key, sessions, audit trail). */
export const PRIVATE_DIR_MODE = 0o700;
/** Mode of a file in such a folder. */
export const PRIVATE_FILE_MODE = 0o600;

/** What {@link ensurePrivateDir} did: `tightenedFrom` is the old mode when it was looser. */
export interface PrivateDirResult {
  path: string;
  created: boolean;
  tightenedFrom?: number;
}

/** The effective uid, or undefined where there is none (Windows: no owner check). */
function myUid(): number | undefined {
  return typeof process.getuid === 'function' ? process.getuid() : undefined;
}

function octal(mode: number): string {
  return '0' + (mode & 0o777).toString(8);
}

/**
 * Makes `dir` a folder only this user can enter: created 0700 when missing; an existing
 * folder with a looser mode is tightened to 0700. Throws FAILED_PRECONDITION (and changes
 * nothing) when it is not a folder, is owned by another user, or cannot be tightened.
 */
export function ensurePrivateDir(dir: string): PrivateDirResult {
  let created = false;
  try {
    created = mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE }) !== undefined;
  } catch (err) {
    throw new TetherError('FAILED_PRECONDITION', `cannot create the private folder ${dir}: ${(err as Error).message}`);
  }
  const st = statSync(dir);
  if (!st.isDirectory()) throw new TetherError('FAILED_PRECONDITION', `${dir} is not a folder`);
  const uid = myUid();
  if (uid !== undefined && st.uid !== uid) {
    throw new TetherError(
      'FAILED_PRECONDITION',
      `${dir} is owned by uid ${st.uid}, not by this user (uid ${uid}); refusing to keep the key, sessions or audit trail there (chown it, or pick another --state-dir)`,
    );
  }
  if ((st.mode & 0o077) === 0) return { path: dir, created };
  try {
    chmodSync(dir, PRIVATE_DIR_MODE);
  } catch (err) {
    throw new TetherError(
      'FAILED_PRECONDITION',
      `${dir} has mode ${octal(st.mode)} and cannot be tightened to ${octal(PRIVATE_DIR_MODE)}: ${(err as Error).message}`,
    );
  }
  return { path: dir, created, tightenedFrom: st.mode & 0o777 };
}

/**
 * Opens `path` for appending, created 0600, never through a symlink; an existing file owned by
 * another user is refused (FAILED_PRECONDITION) and a looser mode is tightened to 0600. The
 * caller owns the returned descriptor.
 */
export function openPrivateAppend(path: string): number {
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | (constants.O_NOFOLLOW ?? 0), PRIVATE_FILE_MODE);
  } catch (err) {
    throw new TetherError('FAILED_PRECONDITION', `cannot open ${path} for appending: ${(err as Error).message}`);
  }
  try {
    const st = fstatSync(fd);
    const uid = myUid();
    if (!st.isFile()) throw new TetherError('FAILED_PRECONDITION', `${path} is not a regular file`);
    if (uid !== undefined && st.uid !== uid)
      throw new TetherError('FAILED_PRECONDITION', `${path} is owned by uid ${st.uid}, not by this user (uid ${uid})`);
    if ((st.mode & 0o077) !== 0) fchmodSync(fd, PRIVATE_FILE_MODE);
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err instanceof TetherError
      ? err
      : new TetherError('FAILED_PRECONDITION', `cannot make ${path} private: ${(err as Error).message}`);
  }
}
