/**
 * Helpers for tests that run the real Claude Code CLI against the scripted fake API
 * (see fake-anthropic.ts): where the binary is, the environment it needs, temp dirs, and a
 * small NDJSON driver over the CLI's stdio.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { STREAM_JSON_FLAGS } from '../../agent/engine-command.js';
import { withTimeout } from './wait.js';

/** The canonical stream-json launch (engine-protocol.md §1.1): the flags the agent gives every engine. */
export const STREAM_JSON_ARGS: readonly string[] = STREAM_JSON_FLAGS;

const SDK_PACKAGE = '@anthropic-ai/claude-agent-sdk';

/** Why no binary was found: tests that need the real CLI fail with this, not with a guess. */
const NOT_INSTALLED = `the Claude Code CLI is not installed: run npm ci (the ${SDK_PACKAGE} devDependency ships it for this platform) or set TETHER_TEST_CLAUDE`;

/**
 * Path of the native CLI binary: `$TETHER_TEST_CLAUDE` if set, else the platform package the
 * SDK depends on (resolved from the SDK's own location, glibc before musl). Throws when
 * neither is there.
 */
export function claudeBinaryPath(): string {
  const override = process.env.TETHER_TEST_CLAUDE;
  if (override) return override;
  const fromSdk = sdkRequire();
  if (!fromSdk) throw new Error(NOT_INSTALLED);
  for (const candidate of platformPackages()) {
    try {
      const path = fromSdk.resolve(`${candidate}/claude`);
      if (existsSync(path)) return path;
    } catch {
      // Not installed for this platform; try the next candidate.
    }
  }
  throw new Error(NOT_INSTALLED);
}

/** Resolves from the SDK's own folder, since the platform package is the SDK's dependency. */
function sdkRequire(): NodeRequire | undefined {
  try {
    return createRequire(createRequire(import.meta.url).resolve(SDK_PACKAGE));
  } catch {
    return undefined;
  }
}

function platformPackages(): string[] {
  const base = `${SDK_PACKAGE}-${process.platform}-${process.arch}`;
  return process.platform === 'linux' ? [base, `${base}-musl`] : [base];
}

export interface ClaudeTestEnvOptions {
  home: string;
  baseUrl: string;
  /** Added last, e.g. `{ CLAUDE_CODE_MAX_RETRIES: '1' }`. */
  extra?: Record<string, string>;
}

/** A complete environment (nothing inherited but PATH) for a CLI that talks only to the fake. */
export function claudeTestEnv({ home, baseUrl, extra }: ClaudeTestEnvOptions): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    HOME: home,
    ANTHROPIC_API_KEY: 'sk-test',
    ANTHROPIC_BASE_URL: baseUrl,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    CLAUDE_CODE_SDK_READS_SESSION_STATE: '1',
    ...extra,
  };
}

export interface TempDir {
  path: string;
  /** Removes the directory tree; safe to call twice. */
  cleanup(): void;
}

/** Creates a fresh directory under the OS temp dir. */
export function makeTempDir(prefix: string): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) };
}

/** A parsed stdout line. Engine frames are open-ended, so fields stay loosely typed. */
export type Frame = Record<string, any>;

export interface ClaudeExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnClaudeOptions {
  cwd: string;
  env: Record<string, string>;
  /** Defaults to STREAM_JSON_ARGS. */
  args?: readonly string[];
  /** The executable (default: the CLI; e.g. node, with tether-claude's path first in `args`). */
  command?: string;
}

/** A running CLI speaking NDJSON on stdio. */
export interface ClaudeProcess {
  child: ChildProcessWithoutNullStreams;
  /** Every stdout frame so far, in order (live array). */
  frames: Frame[];
  /** Writes one frame as one NDJSON line (fire and forget; EPIPE after exit is swallowed). */
  send(frame: object): void;
  /**
   * First frame at index >= `fromIndex` matching `match`, waiting up to `timeoutMs`.
   * Rejects on timeout or process exit, with the stderr tail for diagnosis.
   */
  waitFor(match: (f: Frame) => boolean, timeoutMs: number, fromIndex?: number): Promise<Frame>;
  /** Ends stdin (EOF), which lets the CLI finish and exit on its own. */
  closeStdin(): void;
  /** Resolves with how the process ended; rejects after `timeoutMs`. */
  waitForExit(timeoutMs: number): Promise<ClaudeExit>;
  /** SIGKILL if still running, then waits for the exit. Idempotent; for teardown. */
  kill(): Promise<void>;
  stderr(): string;
}

const STDERR_KEEP_CHARS = 8_000;

/** Spawns the CLI and starts reading its stdout as NDJSON (non-JSON lines are ignored). */
export function spawnClaude({ cwd, env, args = STREAM_JSON_ARGS, command = claudeBinaryPath() }: SpawnClaudeOptions): ClaudeProcess {
  const child = spawn(command, [...args], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const frames: Frame[] = [];
  const listeners = new Set<() => void>();
  const notify = (): void => listeners.forEach((l) => l());
  let stderrText = '';
  let exit: ClaudeExit | undefined;

  child.stdin.on('error', () => {}); // EPIPE after the CLI exits is expected in teardown.
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s: string) => {
    stderrText = (stderrText + s).slice(-STDERR_KEEP_CHARS);
  });
  createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
    const frame = parseFrame(line);
    if (frame) frames.push(frame);
    notify();
  });
  const exited = new Promise<ClaudeExit>((resolve) => {
    child.once('close', (code, signal) => {
      exit = { code, signal };
      resolve(exit);
      notify();
    });
  });

  const describe = (): string =>
    `last frames: ${frames.slice(-5).map(frameLabel).join(', ') || 'none'}; ` +
    `exit: ${exit ? JSON.stringify(exit) : 'running'}; stderr tail: ${stderrText.slice(-1_500) || '(empty)'}`;

  const waitFor: ClaudeProcess['waitFor'] = (match, timeoutMs, fromIndex = 0) =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const found = frames.slice(fromIndex).find(match);
        if (found) finish(() => resolve(found));
        else if (exit) finish(() => reject(new Error(`CLI exited before the awaited frame; ${describe()}`)));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`no matching frame within ${timeoutMs} ms; ${describe()}`))), timeoutMs);
      const finish = (settle: () => void): void => {
        clearTimeout(timer);
        listeners.delete(check);
        settle();
      };
      listeners.add(check);
      check();
    });

  const waitForExit = (timeoutMs: number): Promise<ClaudeExit> => withTimeout(exited, timeoutMs, () => `the CLI to exit; ${describe()}`);

  return {
    child,
    frames,
    send: (frame) => void child.stdin.write(`${JSON.stringify(frame)}\n`),
    waitFor,
    closeStdin: () => void child.stdin.end(),
    waitForExit,
    kill: async () => {
      if (!exit) child.kill('SIGKILL');
      await waitForExit(5_000);
    },
    stderr: () => stderrText,
  };
}

/** Sends `initialize` and waits for its success reply: the CLI's readiness signal. */
export async function initializeClaude(cli: ClaudeProcess, timeoutMs = 10_000): Promise<Frame> {
  const requestId = 'init_1';
  cli.send({ type: 'control_request', request_id: requestId, request: { subtype: 'initialize', hooks: null } });
  const reply = await cli.waitFor((f) => f.type === 'control_response' && f.response?.request_id === requestId, timeoutMs);
  if (reply.response.subtype !== 'success') throw new Error(`initialize failed: ${JSON.stringify(reply)}`);
  return reply;
}

/** A user frame carrying a plain-text prompt. */
export function userMessage(text: string): object {
  return { type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: 'default' };
}

/** The success answer to a CLI control_request (e.g. can_use_tool). */
export function controlSuccess(requestId: string, response: object): object {
  return { type: 'control_response', response: { subtype: 'success', request_id: requestId, response } };
}

function parseFrame(line: string): Frame | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Frame) : undefined;
  } catch {
    return undefined;
  }
}

function frameLabel(f: Frame): string {
  const sub = f.subtype ?? f.request?.subtype ?? f.response?.subtype;
  return sub ? `${f.type}/${sub}` : String(f.type);
}
