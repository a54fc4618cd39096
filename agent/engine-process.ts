/**
 * The engine child process (the Claude Code CLI, or anything speaking NDJSON on stdio):
 * spawning it in its own process group, pulling its stdout line by line with backpressure,
 * writing frames to its stdin, keeping a stderr tail, and stopping it without leaving
 * descendants behind. engine-protocol.md §2 and §11; threats.md G1–G8.
 */
import { spawn as spawnChild, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { TetherError } from '../core/errors.js';
import type { StopSignal } from '../core/protocol/methods.js';
import { silentLogger, type Logger } from '../core/logging.js';
import type { EngineSet } from './engine-set.js';
import { DEFAULT_MAX_LINE_BYTES, LineSplitter, type EngineLine } from './line-splitter.js';
import { DEFAULT_STDERR_TAIL_BYTES, StderrLogSampler, StderrTail } from './stderr-tail.js';

export type { EngineLine, InvalidLineCode } from './line-splitter.js';

/** How the engine ended. `stderrTail` is the last bytes of its stderr as (untrusted) text. */
export interface ExitInfo {
  /** Exit code, or null when it was ended by a signal. */
  code: number | null;
  /** Name of the signal that ended it (e.g. 'SIGKILL'), or null after a normal exit. */
  signal: string | null;
  stderrTail: string;
}

/** How to start one engine, plus limits and stop timings. */
export interface EngineProcessOptions {
  command: string;
  args: string[];
  cwd: string;
  /** The complete environment of the engine (not merged with the agent's). */
  env: NodeJS.ProcessEnv;
  /** Run as this OS user and group (the agent must be allowed to switch: agent/engine-env.ts). */
  uid?: number;
  gid?: number;
  /** Cap on one stdout line; default 16 MiB. A longer line yields one LINE_TOO_LONG item. */
  maxLineBytes?: number;
  /** Size of the stderr ring; default 64 KiB. */
  stderrTailBytes?: number;
  /** stop(): wait after stdin EOF before SIGTERM; default 5000 ms. */
  eofGraceMs?: number;
  /**
   * stop(): wait after SIGTERM before SIGKILL; default 5000 ms. Also how long the stdout/stderr
   * pipes may stay open after the engine exited (held by an escaped descendant) before they are
   * destroyed, so `exited` always settles.
   */
  termGraceMs?: number;
  logger?: Logger;
  /** The program's live engines: this one joins it while its leader runs (agent/engine-set.ts). */
  engineSet?: EngineSet;
}

/** stop(): wait after stdin EOF before SIGTERM, unless eofGraceMs says otherwise. */
export const DEFAULT_EOF_GRACE_MS = 5000;
/** stop(): wait after SIGTERM before SIGKILL, unless termGraceMs says otherwise. */
export const DEFAULT_TERM_GRACE_MS = 5000;

/**
 * One running engine. Create with {@link EngineProcess.spawn}.
 *
 * Start failures (command not found, not executable, bad cwd, invalid arguments) never throw:
 * `spawn` returns an engine whose `exited` (and `stop()`) rejects with
 * `TetherError('FAILED_PRECONDITION', 'cannot start engine "<cmd>": <reason>')`, whose `pid` is
 * 0, whose `lines()` ends at once and whose `write` rejects. (Node only reports ENOENT/EACCES
 * asynchronously, so a synchronous throw could not say why.) Invalid options (a non-positive
 * limit) do throw `TetherError('INVALID_ARGUMENT')`: that is a caller bug.
 */
export class EngineProcess {
  /**
   * Starts the engine with `detached: true` (it leads its own process group, so the whole group
   * can be signalled) and three pipes. Never throws for start failures; see the class doc.
   */
  static spawn(opts: EngineProcessOptions): EngineProcess {
    return new EngineProcess(opts);
  }

  /** OS pid of the engine, which is also its process group id; 0 when it never started. */
  readonly pid: number;
  /**
   * Settles once: after the engine exited AND its stdout and stderr closed, so every line it
   * wrote is in `lines()` by then (lines not yet pulled stay available). Resolves with the exit
   * info; rejects only when the engine could not be started. Never rejects unhandled.
   */
  readonly exited: Promise<ExitInfo>;

  private readonly child: ChildProcessWithoutNullStreams | null = null;
  private readonly log: Logger;
  private readonly command: string;
  private readonly eofGraceMs: number;
  private readonly termGraceMs: number;
  private readonly splitter: LineSplitter;
  private readonly tail: StderrTail;
  private readonly stderrLog: StderrLogSampler;
  private readonly engineSet: EngineSet | undefined;

  private resolveExited!: (info: ExitInfo) => void;
  private rejectExited!: (err: TetherError) => void;
  private leaderExitWaiters: (() => void)[] = [];

  private started = false;
  private leaderExited = false;
  private startError: TetherError | null = null;
  private exitCode: number | null = null;
  private exitSignal: string | null = null;
  private stdoutClosed = false;
  private stderrClosed = false;
  private settled = false;
  private pipeTimer: NodeJS.Timeout | null = null;
  private stopPromise: Promise<ExitInfo> | null = null;

  private readonly queue: EngineLine[] = [];
  private queueHead = 0;
  private readonly waiters: ((r: IteratorResult<EngineLine>) => void)[] = [];
  private linesTaken = false;
  private abandoned = false;
  private bytesRead = 0;

  private constructor(opts: EngineProcessOptions) {
    const maxLineBytes = positive(opts.maxLineBytes, DEFAULT_MAX_LINE_BYTES, 'maxLineBytes');
    const tailBytes = positive(opts.stderrTailBytes, DEFAULT_STDERR_TAIL_BYTES, 'stderrTailBytes');
    this.eofGraceMs = nonNegative(opts.eofGraceMs, DEFAULT_EOF_GRACE_MS, 'eofGraceMs');
    this.termGraceMs = nonNegative(opts.termGraceMs, DEFAULT_TERM_GRACE_MS, 'termGraceMs');
    this.command = opts.command;
    this.engineSet = opts.engineSet;
    this.splitter = new LineSplitter(maxLineBytes);
    this.tail = new StderrTail(tailBytes);
    this.exited = new Promise<ExitInfo>((resolve, reject) => {
      this.resolveExited = resolve;
      this.rejectExited = reject;
    });
    this.exited.catch(() => undefined);

    const base = opts.logger ?? silentLogger;
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawnChild(opts.command, opts.args, {
        cwd: opts.cwd,
        env: opts.env,
        uid: opts.uid,
        gid: opts.gid,
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
    } catch (err) {
      this.pid = 0;
      this.log = base.child({ component: 'engine' });
      this.stderrLog = new StderrLogSampler(this.log);
      this.failStart(err);
      return;
    }
    this.child = child;
    this.pid = child.pid ?? 0;
    this.log = base.child({ component: 'engine', enginePid: this.pid });
    this.stderrLog = new StderrLogSampler(this.log);

    child.on('error', (err) => {
      if (!this.started) this.failStart(err);
      else this.log.warn({ err: err.message }, 'engine process error');
    });
    if (child.pid === undefined) return; // 'error' follows on the next tick.

    this.started = true;
    this.engineSet?.add(this);
    this.log.info({ command: opts.command, cwd: opts.cwd }, 'engine started');
    this.log.debug({ args: opts.args }, 'engine arguments');

    child.on('exit', (code, signal) => this.onLeaderExit(code, signal));

    child.stdin.on('error', (err) => this.log.debug({ err: err.message }, 'engine stdin error'));

    const { stdout, stderr } = child;
    stdout.pause(); // pull-style: read only while someone waits in lines()
    stdout.on('data', (chunk: Buffer) => this.onStdout(chunk));
    stdout.on('error', (err) => this.log.warn({ err: err.message }, 'engine stdout error'));
    stdout.on('close', () => this.onStdoutClosed());

    stderr.on('data', (chunk: Buffer) => {
      this.tail.push(chunk);
      this.stderrLog.push(chunk);
    });
    stderr.on('error', (err) => this.log.warn({ err: err.message }, 'engine stderr error'));
    stderr.on('close', () => {
      this.stderrLog.end();
      this.stderrClosed = true;
      this.maybeSettle();
    });
  }

  /** True once the engine process has exited or failed to start (its pipes may still drain). */
  get hasExited(): boolean {
    return this.leaderExited || this.startError !== null;
  }

  /** Diagnostics: stdout bytes the agent has read from the pipe so far. */
  get stdoutBytesRead(): number {
    return this.bytesRead;
  }

  /** Diagnostics: the current stderr tail (same text as ExitInfo.stderrTail at the end). */
  get stderrTail(): string {
    return this.tail.text();
  }

  /**
   * The engine's stdout, one item per line, in order; ends after stdout ended and every line was
   * yielded. Pull-style: while nobody awaits `next()`, stdout is not read, so a busy engine
   * blocks on its pipe (nothing is dropped and nothing piles up in memory). Once the engine has
   * exited, what is left in the pipe is read ahead so `exited` can settle. Breaking out of the
   * loop (iterator `return()`) discards all further output without blocking the engine.
   * May be called once; a second call throws TetherError FAILED_PRECONDITION.
   */
  lines(): AsyncIterable<EngineLine> {
    if (this.linesTaken) throw new TetherError('FAILED_PRECONDITION', 'engine lines() can only be taken once');
    this.linesTaken = true;
    const iterator: AsyncIterableIterator<EngineLine> = {
      next: () => this.nextLine(),
      return: async () => {
        this.abandonLines();
        return { done: true, value: undefined };
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }

  /**
   * Writes `JSON.stringify(value) + '\n'` to the engine's stdin. Resolves once the bytes were
   * handed to the OS and, if stdin's buffer was full, after 'drain' (await each write to honour
   * backpressure). Rejects with TetherError INVALID_ARGUMENT if `value` is not a plain object or
   * cannot be serialised, and FAILED_PRECONDITION if the engine has exited, is being stopped, or
   * the write failed (e.g. EPIPE because the engine closed stdin). On an engine that could not
   * start it rejects with the start error itself ('cannot start engine "<cmd>": …'). `serialized`:
   * `JSON.stringify(value)` when the caller has it already (it checked the line).
   */
  write(value: Record<string, unknown>, serialized?: string): Promise<void> {
    if (!isPlainObject(value)) {
      return Promise.reject(new TetherError('INVALID_ARGUMENT', 'engine frames must be plain JSON objects'));
    }
    let text: string;
    try {
      text = serialized ?? JSON.stringify(value);
    } catch (err) {
      return Promise.reject(new TetherError('INVALID_ARGUMENT', `cannot serialise engine frame: ${errMessage(err)}`));
    }
    if (typeof text !== 'string' || !text.startsWith('{')) {
      return Promise.reject(new TetherError('INVALID_ARGUMENT', 'engine frame did not serialise to a JSON object'));
    }
    if (this.startError) return Promise.reject(this.startError);
    const stdin = this.child?.stdin;
    if (!this.started) {
      // Node reports ENOENT/EACCES on the next tick: fail with that reason once it is known.
      return this.exited.then(() => {
        throw new TetherError('FAILED_PRECONDITION', 'engine is not running');
      });
    }
    if (this.hasExited || !stdin) {
      return Promise.reject(new TetherError('FAILED_PRECONDITION', 'engine is not running'));
    }
    if (this.stopPromise || stdin.destroyed || stdin.writableEnded || !stdin.writable) {
      return Promise.reject(new TetherError('FAILED_PRECONDITION', 'engine stdin is closed'));
    }
    return new Promise<void>((resolve, reject) => {
      let written = false;
      let drained = true;
      let done = false;
      // Made only when stdin's buffer is full (rare): 'drain', or a close after our bytes left
      // (they are in the pipe), ends the wait.
      let onDrain: (() => void) | undefined;
      const finish = (err?: unknown) => {
        if (done) return;
        if (!err && !(written && drained)) return;
        done = true;
        if (onDrain) {
          stdin.off('drain', onDrain);
          stdin.off('close', onDrain);
        }
        if (err) reject(new TetherError('FAILED_PRECONDITION', `cannot write to engine: ${errMessage(err)}`));
        else resolve();
      };
      const ok = stdin.write(`${text}\n`, (err) => {
        if (err) return finish(err);
        written = true;
        finish();
      });
      if (!ok) {
        drained = false;
        onDrain = () => {
          drained = true;
          finish();
        };
        stdin.on('drain', onDrain);
        stdin.on('close', onDrain);
      }
    });
  }

  /**
   * Staged stop (engine-protocol.md §11): end stdin → wait eofGraceMs → SIGTERM to the process
   * group → wait termGraceMs → SIGKILL to the group. When the engine exits at any stage, the
   * group is SIGKILLed so no descendant survives. Idempotent: every call returns the same
   * promise, which is `exited` (the last lines are never lost). Rejects only if the engine never
   * started. `from` SIGTERM or SIGKILL starts with that signal instead (stdin is not closed
   * first, as with a local kill), or escalates a stop in progress.
   */
  stop(from: StopSignal = 'eof'): Promise<ExitInfo> {
    if (!this.stopPromise) this.stopPromise = this.runStop(from);
    else if (from !== 'eof') this.escalate(from);
    return this.stopPromise;
  }

  /**
   * A harder stop than the staged one (a client's SIGTERM or SIGKILL): signals the group now;
   * after SIGTERM, SIGKILL follows when the engine is still there after termGraceMs.
   */
  private escalate(signal: 'SIGTERM' | 'SIGKILL'): void {
    this.log.info({ signal }, 'stopping engine with a signal at once');
    this.signalGroup(signal);
    if (signal === 'SIGTERM') void this.waitLeaderExit(this.termGraceMs).then((exited) => exited || this.signalGroup('SIGKILL'));
  }

  /** SIGKILL to the whole process group now; no-op once the engine has exited. Never throws. */
  kill(): void {
    this.signalGroup('SIGKILL');
  }

  private async runStop(from: StopSignal): Promise<ExitInfo> {
    if (this.started && !this.leaderExited && from !== 'eof') {
      this.escalate(from); // like a local kill: the signal only, stdin stays open until the exit
    } else if (this.started && !this.leaderExited) {
      this.log.debug('stopping engine: closing stdin');
      try {
        this.child!.stdin.end();
      } catch (err) {
        this.log.debug({ err: errMessage(err) }, 'engine stdin end failed');
      }
      if (!(await this.waitLeaderExit(this.eofGraceMs))) {
        this.log.info({ graceMs: this.eofGraceMs }, 'engine still running after stdin EOF; sending SIGTERM');
        this.signalGroup('SIGTERM');
        if (!(await this.waitLeaderExit(this.termGraceMs))) {
          this.log.warn({ graceMs: this.termGraceMs }, 'engine still running after SIGTERM; sending SIGKILL');
          this.signalGroup('SIGKILL');
        }
      }
    }
    return this.exited;
  }

  /** Resolves true when the leader exits within `ms`, false on timeout. */
  private waitLeaderExit(ms: number): Promise<boolean> {
    if (this.leaderExited) return Promise.resolve(true);
    return new Promise((resolve) => {
      const waiter = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.leaderExitWaiters = this.leaderExitWaiters.filter((w) => w !== waiter);
        resolve(false);
      }, ms);
      this.leaderExitWaiters.push(waiter);
    });
  }

  /**
   * Signals the engine's process group. Never after the leader was reaped (except the one
   * SIGKILL right at its exit): the group id could then belong to someone else.
   */
  private signalGroup(signal: NodeJS.Signals): void {
    if (!this.started || this.leaderExited || this.pid <= 0) return;
    this.rawKillGroup(signal);
  }

  private rawKillGroup(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, signal);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ESRCH') this.log.warn({ err: errMessage(err), signal }, 'cannot signal engine process group');
    }
  }

  private onLeaderExit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.leaderExited) return;
    this.leaderExited = true;
    this.exitCode = code;
    this.exitSignal = signal;
    this.engineSet?.delete(this);
    // Descendants left in the group (a Bash tool's server, `sleep 300 &`) die with the engine.
    this.rawKillGroup('SIGKILL');
    this.log.info({ code, signal }, 'engine exited');
    for (const w of this.leaderExitWaiters.splice(0)) w();
    // Read what is left in the pipes now, so `exited` does not depend on a consumer pulling.
    if (!this.stdoutClosed) this.child!.stdout.resume();
    if (!this.stdoutClosed || !this.stderrClosed) {
      this.pipeTimer = setTimeout(() => {
        this.pipeTimer = null;
        this.log.warn('engine pipes still open after exit (held by an escaped descendant?); closing them');
        this.child!.stdout.destroy();
        this.child!.stderr.destroy();
      }, this.termGraceMs);
    }
    this.maybeSettle();
  }

  private onStdout(chunk: Buffer): void {
    this.bytesRead += chunk.length;
    if (this.abandoned) return;
    const before = this.queue.length;
    this.splitter.push(chunk, this.queue);
    this.noteInvalid(before);
    this.deliver();
    // Paused only if nobody waits once the reader has taken what it was given: a reader that
    // takes each line and asks for the next at once (a prompt's answer) keeps stdout flowing,
    // instead of a pause and a resume per line.
    if (!this.pauseCheckQueued) {
      this.pauseCheckQueued = true;
      queueMicrotask(this.pauseIfNobodyWaits);
    }
  }

  private pauseCheckQueued = false;
  private readonly pauseIfNobodyWaits = (): void => {
    this.pauseCheckQueued = false;
    if (this.waiters.length === 0 && !this.leaderExited && !this.stdoutClosed && !this.abandoned) this.child!.stdout.pause();
  };

  private onStdoutClosed(): void {
    if (this.stdoutClosed) return;
    this.stdoutClosed = true;
    if (!this.abandoned) {
      const before = this.queue.length;
      this.splitter.end(this.queue);
      this.noteInvalid(before);
    }
    this.deliver();
    this.maybeSettle();
  }

  private noteInvalid(from: number): void {
    for (let i = from; i < this.queue.length; i++) {
      const item = this.queue[i]!;
      if (item.kind === 'invalid') this.log.debug({ code: item.code, bytes: item.bytes }, 'engine wrote an invalid line');
    }
  }

  private nextLine(): Promise<IteratorResult<EngineLine>> {
    if (this.queueHead < this.queue.length && this.waiters.length === 0) {
      return Promise.resolve({ done: false, value: this.shift() });
    }
    if (this.abandoned || this.stdoutClosed || !this.started) {
      if (this.queueHead >= this.queue.length) return Promise.resolve({ done: true, value: undefined });
    }
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.deliver();
      if (this.waiters.length > 0 && this.child && !this.stdoutClosed) this.child.stdout.resume();
    });
  }

  private deliver(): void {
    while (this.waiters.length > 0 && this.queueHead < this.queue.length) {
      this.waiters.shift()!({ done: false, value: this.shift() });
    }
    if (this.waiters.length > 0 && (this.stdoutClosed || this.abandoned || !this.started)) {
      for (const w of this.waiters.splice(0)) w({ done: true, value: undefined });
    }
  }

  private shift(): EngineLine {
    const item = this.queue[this.queueHead]!;
    this.queue[this.queueHead++] = undefined as unknown as EngineLine;
    if (this.queueHead === this.queue.length) {
      this.queue.length = 0;
      this.queueHead = 0;
    } else if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
    return item;
  }

  private abandonLines(): void {
    if (this.abandoned) return;
    this.abandoned = true;
    this.queue.length = 0;
    this.queueHead = 0;
    this.deliver();
    if (this.child && !this.stdoutClosed) this.child.stdout.resume();
  }

  private failStart(err: unknown): void {
    if (this.startError) return;
    const reason = errMessage(err);
    const errno = (err as NodeJS.ErrnoException | undefined)?.code;
    this.startError = new TetherError('FAILED_PRECONDITION', `cannot start engine "${this.command}": ${reason}`, {
      ...(errno ? { errno } : {}),
    });
    this.log.warn({ command: this.command, err: reason }, 'engine could not be started');
    if (this.child) {
      this.child.stdin.destroy();
      this.child.stdout.destroy();
      this.child.stderr.destroy();
    }
    this.deliver();
    this.settled = true;
    this.rejectExited(this.startError);
  }

  private maybeSettle(): void {
    if (this.settled || !this.leaderExited || !this.stdoutClosed || !this.stderrClosed) return;
    this.settled = true;
    if (this.pipeTimer) clearTimeout(this.pipeTimer);
    this.pipeTimer = null;
    this.resolveExited({ code: this.exitCode, signal: this.exitSignal, stderrTail: this.tail.text() });
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new TetherError('INVALID_ARGUMENT', `${name} must be a positive integer, got ${value}`);
  }
  return value;
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) {
    throw new TetherError('INVALID_ARGUMENT', `${name} must be a non-negative number, got ${value}`);
  }
  return value;
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
