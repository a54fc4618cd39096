import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { waitFor } from './wait.js';

/** The compiled CLI (npm test builds before vitest runs). */
export const TETHER_BIN = fileURLToPath(new URL('../../dist/bin/tether.js', import.meta.url));

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The compiled SDK drop-in. */
export const TETHER_CLAUDE_BIN = fileURLToPath(new URL('../../dist/bin/tether-claude.js', import.meta.url));

/** Runs `tether ARGS` (or another of our programs, `bin`) to completion (bounded) and returns its output. */
export function runTether(
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number; input?: string; bin?: string } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [opts.bin ?? TETHER_BIN, ...args], {
      env: { ...process.env, ...opts.env },
      cwd: opts.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`tether ${args.join(' ')} did not finish within ${opts.timeoutMs ?? 30_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`),
      );
    }, opts.timeoutMs ?? 30_000);
    child.on('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}

/** A long-running `tether` command (up, gateway, agent) and the lines it printed. */
export interface Daemon {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the first stdout line starting with `prefix` (bounded). */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  /** Sends a signal and waits for exit (bounded); SIGKILL after the bound. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function startTether(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Daemon {
  const child = spawn(process.execPath, [TETHER_BIN, ...args], {
    env: { ...process.env, ...opts.env },
    cwd: opts.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    async line(prefix, timeoutMs = 15_000) {
      const found = () => out.split('\n').find((l) => l.startsWith(prefix));
      await waitFor(
        () => {
          if (found() === undefined && child.exitCode !== null)
            throw new Error(`tether exited (${child.exitCode}) before printing "${prefix}"\nstderr: ${err}`);
          return found() !== undefined;
        },
        timeoutMs,
        () => `a "${prefix}" line\nstdout: ${out}\nstderr: ${err}`,
      );
      return found()!;
    },
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const r = await exited;
      clearTimeout(t);
      return r;
    },
  };
}

/** Pids of live processes whose command line contains `needle` and whose cwd is `cwd`. */
export function processesIn(cwd: string, needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(join('/proc', entry, 'cmdline'), 'utf8');
      if (!cmd.includes(needle)) continue;
      if (readlinkSync(join('/proc', entry, 'cwd')) !== cwd) continue;
      const stat = readFileSync(join('/proc', entry, 'stat'), 'utf8');
      if (stat.split(') ')[1]?.startsWith('Z')) continue; // zombie: already dead
      pids.push(Number(entry));
    } catch {
      // the process went away while we looked
    }
  }
  return pids;
}

/** SIGKILLs the processes {@link processesIn} finds (engines a killed agent left behind). */
export function killProcessesIn(cwd: string, needle: string): void {
  for (const pid of processesIn(cwd, needle)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

/**
 * A `tether gateway` daemon in a state folder of its own, for the calling describe block:
 * `start()` (again after a stop: same state, so keys and revocations carry over) runs it with
 * `--port 0` and `args`, and resolves once it printed its URL. The last daemon and the folder
 * go after the block.
 */
export function gatewayDaemonPerSuite(
  prefix: string,
  args: string[],
): { state: string; start(): Promise<{ daemon: Daemon; url: string }> } {
  const state = mkdtempSync(join(tmpdir(), prefix));
  let daemon: Daemon | undefined;
  afterAll(async () => {
    await daemon?.stop();
    rmSync(state, { recursive: true, force: true });
  });
  return {
    state,
    async start() {
      daemon = startTether(['gateway', '--port', '0', '--state-dir', state, ...args]);
      return { daemon, url: (await daemon.line('gateway: ')).slice('gateway: '.length) };
    },
  };
}
