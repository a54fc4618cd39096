import { readFileSync } from 'node:fs';
import { afterAll } from 'vitest';

declare module 'vitest' {
  interface TaskMeta {
    /** CPU milliseconds this file cost its worker (test/support/file-cpu.ts); read by test/support/slowest-files.ts. */
    cpuMs?: number;
  }
}

/** Clock ticks per second of /proc's times (getconf CLK_TCK: 100 on Linux everywhere we run). */
const TICKS_PER_SECOND = 100;

/**
 * This process's CPU so far in ms: its own utime+stime plus cutime+cstime, the children it has
 * waited for (child_process reaps every child it spawned once it exits). A child still running
 * at the end, or one started detached and never waited for (a daemon), is not counted. Null
 * where there is no /proc (not Linux).
 */
export function processCpuMs(): number | null {
  let stat: string;
  try {
    stat = readFileSync('/proc/self/stat', 'utf8');
  } catch {
    return null;
  }
  // Fields after the command name (which may hold spaces, hence the last ')'): state is
  // field 3, utime..cstime are fields 14..17.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = fields.slice(11, 15).reduce((sum, f) => sum + Number(f), 0);
  return (ticks * 1000) / TICKS_PER_SECOND;
}

// Vitest setup file (every test file): records the file's CPU from here (before its imports) to
// its last afterAll hook. The first file in a worker process counts from 0, so a fresh fork's
// start-up (node, vitest, the setup files) is paid by the file that needed it; a file in the
// shared project counts only its own part of the long-lived worker.
const FIRST_FILE_SEEN = Symbol.for('tether.test.cpu.firstFileSeen');
const g = globalThis as Record<symbol, boolean | undefined>;
const startMs = g[FIRST_FILE_SEEN] ? processCpuMs() : 0;
g[FIRST_FILE_SEEN] = true;

// Registered before the file's own hooks, so (hooks run as a stack) it runs after them: the
// file's teardown counts.
// biome-ignore lint/correctness/noEmptyPattern: vitest reads a hook's first parameter as fixtures and wants a pattern there; the file is the second.
afterAll(({}, suite) => {
  const endMs = processCpuMs();
  if (startMs !== null && endMs !== null) suite.file.meta.cpuMs = endMs - startMs;
});
