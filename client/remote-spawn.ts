import { EventEmitter } from 'node:events';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { startRemoteEngine, type RemoteEngine, type RemoteEngineTarget, type RemoteExit } from './remote-engine.js';

/** What the TypeScript Agent SDK hands to `spawnClaudeCodeProcess` (its `SpawnOptions`). */
export interface SpawnRequest {
  /** The local executable the SDK would run; unused. */
  command: string;
  /** The argv the SDK would pass to `claude`; forwarded as session options. */
  args: string[];
  /** A local folder; unused (the remote folder is `cwd` of {@link remoteSpawn}). */
  cwd?: string;
  /**
   * The environment the SDK computed for the CLI. Only its SDK switches reach the engine
   * (core/protocol/sdk-env.ts); everything else stays local (the engine runs with the agent's).
   */
  env: Record<string, string | undefined>;
  /**
   * Aborted by the SDK after its graceful-close window. Handled as Node's `spawn({ signal })`
   * handles it: the engine gets SIGTERM at once and 'error' fires with an AbortError (which
   * ends the SDK's reading), then 'exit' once the engine is gone.
   */
  signal?: AbortSignal;
}

/**
 * A process-like handle on a remote engine, shaped like the SDK's `SpawnedProcess` (and
 * like a ChildProcess as far as that goes): write NDJSON to `stdin`, read the engine's
 * frames from `stdout`. `kill('SIGTERM')` (the default) and `kill('SIGKILL')` send that signal
 * to the remote engine at once, like a local kill; SIGKILL additionally reports the exit at
 * once instead of waiting for the agent; any other signal stops the session the staged way
 * (stdin EOF, then signals after the agent's graces). 'exit' fires once with the engine's exit code and
 * signal, after `stdout` has ended. When the bridge fails (gateway unreachable, session
 * refused, link lost for good), 'error' fires instead, like a process that failed to spawn,
 * and `exitCode` becomes 1.
 */
export interface RemoteProcess {
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly killed: boolean;
  readonly exitCode: number | null;
  readonly signalCode: NodeJS.Signals | null;
  kill(signal?: NodeJS.Signals): boolean;
  on(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  once(event: 'error', listener: (error: Error) => void): this;
  off(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  off(event: 'error', listener: (error: Error) => void): this;
}

export interface RemoteSpawnOptions extends Omit<RemoteEngineTarget, 'software'> {
  /** Receives what the remote CLI wrote on stderr (its tail at exit) and bridge diagnostics. Default: the logger at warn. */
  stderr?: (text: string) => void;
}

class RemoteEngineProcess extends EventEmitter implements RemoteProcess {
  readonly stdin = new PassThrough();
  readonly stdout = new PassThrough();
  killed = false;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  private readonly engine: RemoteEngine;
  private done = false;

  constructor(target: RemoteSpawnOptions, request: SpawnRequest) {
    super();
    const log = target.logger;
    const diagnostics = target.stderr ?? ((text: string) => log?.warn({ stderr: text.trimEnd() }, 'remote engine stderr'));
    this.engine = startRemoteEngine({ ...target, software: 'tether-remote-spawn' }, request.args, {
      input: this.stdin,
      output: this.stdout,
      diagnostics,
      env: request.env,
    });
    const onAbort = () => {
      if (!this.kill('SIGTERM')) return;
      const reason: unknown = request.signal?.reason;
      const err = Object.assign(new Error('The operation was aborted', { cause: reason }), { name: 'AbortError', code: 'ABORT_ERR' });
      if (this.listenerCount('error') > 0) this.emit('error', err);
    };
    if (request.signal?.aborted) queueMicrotask(onAbort);
    else request.signal?.addEventListener('abort', onAbort, { once: true });
    void this.engine.exited.then((exit) => {
      request.signal?.removeEventListener('abort', onAbort);
      this.finish(exit);
    });
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    if (this.done) return false;
    this.killed = true;
    this.engine.stop(signal === 'SIGTERM' || signal === 'SIGKILL' ? signal : 'eof');
    if (signal === 'SIGKILL') this.finish({ code: null, signal: 'SIGKILL' }); // the stop goes on at the agent
    return true;
  }

  private finish(exit: RemoteExit): void {
    if (this.done) return;
    this.done = true;
    if (exit.error) {
      this.exitCode = 1;
      this.stdout.end();
      if (this.listenerCount('error') > 0) this.emit('error', exit.error);
      return;
    }
    this.exitCode = exit.code;
    this.signalCode = exit.signal;
    this.stdout.end();
    this.emit('exit', exit.code, exit.signal);
  }
}

/**
 * A `spawnClaudeCodeProcess` for the TypeScript Agent SDK that runs the engine on a remote
 * agent: `query({ prompt, options: { spawnClaudeCodeProcess: remoteSpawn({ gateway, token,
 * agent, cwd }) } })`. Each call opens its own gateway connection and session; the SDK's
 * arguments become session options (see `sessionOptionsFromArgs`), its `env` and `cwd` stay
 * local.
 */
export function remoteSpawn(options: RemoteSpawnOptions): (request: SpawnRequest) => RemoteProcess {
  return (request) => new RemoteEngineProcess(options, request);
}

/**
 * The SDK's `options` with the engine on a remote agent: `query({ prompt, options:
 * withRemoteEngine({ ...yourOptions }, { gateway, token, agent, cwd }) })`. Unlike a bare
 * `remoteSpawn`, the SDK's own `stderr` option then receives what a local CLI would write on
 * stderr (the engine's stderr tail at exit) and the bridge's diagnostics: the SDK hands
 * `stderr` only to processes it spawns itself. `target.stderr`, when given, wins.
 */
export function withRemoteEngine<O extends { stderr?: (data: string) => void }>(
  options: O,
  target: RemoteSpawnOptions,
): O & { spawnClaudeCodeProcess: (request: SpawnRequest) => RemoteProcess } {
  return { ...options, spawnClaudeCodeProcess: remoteSpawn({ ...target, stderr: target.stderr ?? options.stderr }) };
}
