// The demo engine's one way of running a program: its Bash tool, `/bin/sh -c` in the session's
// folder. The only file of the demo engine that may start processes (.dependency-cruiser.cjs).

import { spawn, type ChildProcess } from 'node:child_process';

/** Bound on one Bash command, as the demo engine tells the model. */
export const BASH_TIMEOUT_MS = 10_000;

/** What a finished command printed and how it ended. */
export interface ShellRun {
  stdout: string;
  stderr: string;
  /** The exit code; 127 when the shell could not be started. */
  code: number;
  timedOut: boolean;
  /** Why the shell could not be started, when it could not. */
  spawnError?: string;
}

const running = new Set<ChildProcess>();

/** Kills every command still running (used on SIGTERM). */
export function killTools(): void {
  for (const child of running) killGroup(child);
}

function killGroup(child: ChildProcess): void {
  try {
    process.kill(-(child.pid ?? NaN), 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

/**
 * Runs `command` with /bin/sh in `cwd`, in a process group of its own so a timeout or an
 * abort kills everything it started. Settles once, when the shell has exited.
 */
export function runShell(command: string, cwd: string, signal: AbortSignal): Promise<ShellRun> {
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', command], { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    running.add(child);
    let stdout = '',
      stderr = '';
    let timedOut = false,
      finished = false;
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, BASH_TIMEOUT_MS);
    const onAbort = (): void => killGroup(child);
    signal.addEventListener('abort', onAbort, { once: true });
    const done = (code: number, spawnError?: string): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      running.delete(child);
      signal.removeEventListener('abort', onAbort);
      resolve({ stdout, stderr, code, timedOut, spawnError });
    };
    child.on('error', (err) => done(127, String(err)));
    child.on('close', (code) => done(code ?? 1));
  });
}
