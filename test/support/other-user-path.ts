/**
 * A program another OS user can run, for tests of --engine-user. A clone in a private folder
 * (mode 0700, as root's home is) keeps every other user out of its node_modules, so the engine
 * binary found there cannot be started as that user (EACCES). Such a binary is hard-linked
 * (copied across file systems) into a fresh 0755 folder under the temp dir instead.
 */
import { chmodSync, copyFileSync, linkSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { makeTempDir, type TempDir } from './claude-cli.js';

/** Whether users other than the owner may run `path`: every folder above it lets others through and the file lets them execute. */
export function othersCanRun(path: string): boolean {
  const real = realpathSync(path);
  if ((statSync(real).mode & 0o001) === 0) return false;
  for (let dir = dirname(real); ; dir = dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    if (dir === dirname(dir)) return true;
  }
}

/** `path` when others may run it; else a link or copy of it they may run (cleanup removes it). */
export function runnableByOthers(path: string): { path: string; folder?: TempDir } {
  if (othersCanRun(path)) return { path };
  const folder = makeTempDir('tether-engine-bin-');
  chmodSync(folder.path, 0o755);
  const target = join(folder.path, basename(path));
  try {
    linkSync(realpathSync(path), target);
  } catch {
    copyFileSync(path, target); // another file system: a copy
    chmodSync(target, 0o755);
  }
  if (!othersCanRun(target)) {
    folder.cleanup();
    throw new Error(
      `${path} is in a folder other users cannot enter, and ${target}, its link under the temp dir, cannot be run by them either (is the temp dir private?)`,
    );
  }
  return { path: target, folder };
}
