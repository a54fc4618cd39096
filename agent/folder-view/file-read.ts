import { closeSync, constants, fstatSync, openSync, readdirSync, readSync, type Stats } from 'node:fs';
import { TetherError } from '../../core/errors.js';
import { FILE_DEFAULT_BYTES, FOLDER_LIST_MAX, type FolderResultOf } from '../../core/protocol/folder-view.js';
import { pathInFolder, type FolderScope } from './folder-paths.js';

/** Git's own test for binary content: a NUL byte in the first 8000 bytes. */
export function looksBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, 8000).includes(0);
}

/**
 * A file's content (its first `maxBytes`, the rest named as cut; binary files named, not sent)
 * or a folder's entries, for a path inside the session's folder (agent/folder-view/folder-paths.ts).
 * The resolved path is opened without following a last symlink, so a link swapped in after the
 * check is refused rather than followed out.
 */
export function readInFolder(scope: FolderScope, rel: string, maxBytes = FILE_DEFAULT_BYTES): FolderResultOf<'file'> {
  const { real } = pathInFolder(scope, rel);
  let fd: number;
  try {
    fd = openSync(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new TetherError('NOT_FOUND', `no file "${rel}" in the session folder`);
    if (code === 'ELOOP') throw new TetherError('PERMISSION_DENIED', `"${rel}" became a symlink: not followed`);
    throw new TetherError('PERMISSION_DENIED', `"${rel}" cannot be read on the agent (${code})`);
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) return { view: 'file', path: rel, kind: 'dir', ...listFolder(real) };
    if (!st.isFile()) throw new TetherError('FAILED_PRECONDITION', `"${rel}" is not a regular file or folder`);
    return { view: 'file', path: rel, kind: 'file', ...readHead(fd, st, maxBytes) };
  } finally {
    closeSync(fd);
  }
}

function readHead(fd: number, st: Stats, maxBytes: number): Pick<FolderResultOf<'file'>, 'size' | 'content' | 'binary' | 'cut'> {
  const want = Math.min(st.size, maxBytes);
  const buf = Buffer.alloc(want);
  let got = 0;
  while (got < want) {
    const n = readSync(fd, buf, got, want - got, got);
    if (n === 0) break;
    got += n;
  }
  const bytes = buf.subarray(0, got);
  if (looksBinary(bytes)) return { size: st.size, binary: true };
  const cut = st.size > maxBytes ? `cut at ${maxBytes} of ${st.size} bytes (the read cap)` : undefined;
  return { size: st.size, content: bytes.toString('utf8'), ...(cut ? { cut } : {}) };
}

function listFolder(real: string): Pick<FolderResultOf<'file'>, 'entries' | 'cut'> {
  const all = readdirSync(real, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
  const entries = all.slice(0, FOLDER_LIST_MAX).map((d) => ({
    name: d.name,
    type: d.isDirectory() ? ('dir' as const) : d.isFile() ? ('file' as const) : d.isSymbolicLink() ? ('link' as const) : ('other' as const),
  }));
  return all.length > FOLDER_LIST_MAX ? { entries, cut: `the first ${FOLDER_LIST_MAX} of ${all.length} entries` } : { entries };
}
