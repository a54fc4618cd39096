import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { asTetherError, TetherError } from '../core/errors.js';
import type { DialOptions } from '../core/link/dial.js';
import { silentLogger, type Logger } from '../core/logging.js';
import { isUnknownToken, readEngineArgv } from '../core/engine-flags.js';
import type { StopSignal } from '../core/protocol/methods.js';
import { pickSdkEnv } from '../core/protocol/sdk-env.js';
import { SessionOptions, type EngineKind } from '../core/protocol/session-options.js';
import { GatewayClient } from './gateway-client.js';
import type { RemoteSession } from './remote-session.js';

/** Where the remote engine runs. */
export interface RemoteEngineTarget {
  /** ws://, wss://, grpc:// or grpcs:// URL of the gateway. */
  gateway: string;
  token?: string;
  /** Name of the agent that runs the engine. */
  agent: string;
  /** Working folder on the agent's machine (default: the agent's own). */
  cwd?: string;
  /** Engine kind (default: the agent's default engine). */
  engine?: EngineKind;
  dial?: DialOptions;
  /** Silent by default. Gateway frames and events that are not relayed are logged at debug. */
  logger?: Logger;
  /** Reported to the gateway in hello (default "tether-claude"). */
  software?: string;
}

/** The three streams of the process the SDK thinks it started. */
export interface RemoteEngineIo {
  /** NDJSON the SDK writes for the engine; read to its end (EOF ends the remote session). */
  input: Readable;
  /** Receives each engine stdout line exactly as the engine wrote it, plus `\n`. Not ended here. */
  output: Writable;
  /** Human diagnostics, what the CLI would print on stderr (whole lines with `\n`). */
  diagnostics: (text: string) => void;
  /** The environment the SDK gave the process: its SDK switches (core/protocol/sdk-env.ts) go to the engine. */
  env?: Record<string, string | undefined>;
}

/** How the remote engine (or the bridge, when it gave up) ended. */
export interface RemoteExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the bridge itself failed (gateway unreachable, refused, link lost for good). */
  error?: TetherError;
}

/** A running bridge between one SDK and one remote session. */
export interface RemoteEngine {
  /** Settles once the remote engine exited or the bridge gave up; never rejects. */
  readonly exited: Promise<RemoteExit>;
  /**
   * Ends the remote session: staged by default (stdin EOF for the engine, then signals);
   * `SIGTERM`/`SIGKILL` signal the engine at once, as a local kill would. A harder call
   * escalates an earlier one; the same or a softer one is a no-op.
   */
  stop(signal?: StopSignal): void;
}

const STOP_RANK: Record<StopSignal, number> = { eof: 1, SIGTERM: 2, SIGKILL: 3 };

/** Bound on waiting for the gateway to confirm a stop before the bridge leaves anyway. */
const STOP_WAIT_MS = 10_000;

/** Flags the bridge maps onto SessionOptions fields (arity: core/engine-flags.ts). */
const MAPPED: Record<string, (o: SessionOptions, value: string) => boolean> = {
  '--model': (o, v) => set(o, 'model', v),
  '--permission-mode': (o, v) => set(o, 'permission_mode', v),
  '--allowedTools': (o, v) => set(o, 'allowed_tools', [...(o.allowed_tools ?? []), ...toolList(v)]),
  '--disallowedTools': (o, v) => set(o, 'disallowed_tools', [...(o.disallowed_tools ?? []), ...toolList(v)]),
  '--resume': (o, v) => set(o, 'resume', v),
  '--system-prompt': (o, v) => set(o, 'system_prompt', v),
  '--append-system-prompt': (o, v) => set(o, 'append_system_prompt', v),
  '--include-partial-messages': (o) => set(o, 'include_partial_messages', true),
};

/**
 * Flags dropped here besides the agent's own plumbing: the debug flags only make the CLI
 * write diagnostics into a file or stderr on the agent's machine, where a client must not
 * choose file paths.
 */
const DROPPED = new Set(['--debug', '--debug-file', '--debug-to-stderr']);

/** Sets a field when the value passes the field's own schema. */
function set(o: SessionOptions, key: keyof SessionOptions, value: unknown): boolean {
  const parsed = SessionOptions.shape[key].safeParse(value);
  if (!parsed.success) return false;
  (o as Record<string, unknown>)[key] = parsed.data;
  return true;
}

function toolList(value: string): string[] {
  return value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
}

/**
 * Turns the argv an SDK passes to `claude` into SessionOptions: the flags with a field of
 * their own become that field (when the value fits the field; otherwise they stay raw), the
 * local-only ones are dropped, and everything else goes verbatim into `extra_args`, which
 * the agent checks against its allow list. Reads argv with the CLI's own arity
 * (core/engine-flags.ts); tokens it does not know pass through verbatim for the agent to judge.
 * Argv without `--permission-prompt-tool` (an app without canUseTool) gets
 * `--permission-prompts none`, so approvals are denied as a local CLI would deny them.
 */
export function sessionOptionsFromArgs(args: readonly string[], cwd?: string): SessionOptions {
  const options: SessionOptions = {};
  const extra: string[] = [];
  let promptRouting = false;
  let lastRaw: string[] | undefined; // a variadic flag's values share one raw group
  for (const item of readEngineArgv(args)) {
    if (isUnknownToken(item)) {
      if (item.problem === 'needs-value') throw new TetherError('INVALID_ARGUMENT', `engine flag "${item.flag!.name}" needs a value`);
      extra.push(item.token);
      continue;
    }
    const { flag, value, raw } = item;
    if (flag.name === '--permission-prompt-tool' || flag.name === '--permission-prompts') promptRouting = true;
    if (flag.class === 'plumbing' || DROPPED.has(flag.name)) continue;
    const apply = MAPPED[flag.name];
    if (apply && (flag.arity === 'none' || value !== undefined) && apply(options, value ?? '')) continue;
    if (raw !== lastRaw) extra.push(...raw); // let the agent judge it
    lastRaw = raw;
  }
  // Without a prompt tool the CLI asks nobody: what needs approval is denied (and the tools
  // that only work with someone to ask are not offered). The agent always routes asks to
  // the gateway, so an SDK app without canUseTool gets the same through this flag.
  if (!promptRouting) extra.push('--permission-prompts', 'none');
  if (cwd) options.cwd = cwd;
  if (extra.length) options.extra_args = extra;
  return options;
}

/**
 * Runs one engine on a remote agent as if it were a local `claude` in stream-json mode:
 * input lines go to the session in order (each retried across reconnects, applied at most
 * once), engine frames and the replies to the SDK's own control requests come out exactly
 * as the engine wrote them; gateway frames and tether events stay out of the stream (debug
 * log only). A line that is not JSON ends everything with exit code 1, like the CLI. Input
 * EOF stops the session; the engine finishes its turn and exits, and `exited` settles with
 * its exit code.
 */
export function startRemoteEngine(target: RemoteEngineTarget, args: readonly string[], io: RemoteEngineIo): RemoteEngine {
  const log = target.logger ?? silentLogger;
  let session: RemoteSession | undefined;
  let stopRequested: StopSignal | undefined;
  let sentRank = 0;
  let stopping: Promise<void> = Promise.resolve();
  const requestStop = (signal: StopSignal = 'eof'): Promise<void> => {
    if (!stopRequested || STOP_RANK[signal] > STOP_RANK[stopRequested]) stopRequested = signal;
    if (!session || STOP_RANK[stopRequested] <= sentRank) return stopping;
    sentRank = STOP_RANK[stopRequested];
    stopping = session.stop(stopRequested).catch((err) => log.debug({ err: String(err) }, 'session.stop did not complete'));
    return stopping;
  };

  const fail = (err: unknown): RemoteExit => {
    const error = asTetherError(err, 'UNAVAILABLE');
    io.diagnostics(`tether-claude: ${error.message}\n`);
    return { code: 1, signal: null, error };
  };

  const run = async (): Promise<RemoteExit> => {
    let client: GatewayClient | undefined;
    try {
      // The SDK sends its own initialize (prompt fields, agents, hooks): it is the engine's one.
      const options: SessionOptions = { ...sessionOptionsFromArgs(args, target.cwd), client_initialize: true };
      const env = pickSdkEnv(io.env ?? {});
      if (Object.keys(env).length) options.env = env;
      client = await GatewayClient.connect({ gateway: target.gateway, token: target.token, dial: target.dial, logger: log, reconnect: true, software: target.software ?? 'tether-claude' });
      session = await client.createSession({ agent: target.agent, engine: target.engine, options, onProgress: (p) => io.diagnostics(`tether-claude: ${p.message}\n`) });
      log.debug({ sessionId: session.id }, 'remote session created');
    } catch (err) {
      await client?.close();
      return fail(err);
    }
    if (stopRequested) void requestStop(stopRequested);
    const relay = new Relay(session, io, log);
    const reader = createInterface({ input: io.input, crlfDelay: Infinity });
    const output = relay.run();
    // Input EOF stops the session and the engine's own exit ends the bridge. A bad input line
    // ends it with exit 1 once the stop is confirmed (or took too long), like the CLI's
    // immediate exit; nothing the engine writes after that line reaches the output.
    let badLine = false;
    const input = pumpInput(session, reader, io, log).then(async (how): Promise<RemoteExit> => {
      if (how === 'eof') {
        void requestStop();
        return output;
      }
      badLine = true;
      relay.silence();
      await withBound(requestStop(), STOP_WAIT_MS);
      return { code: 1, signal: null };
    });
    const raced = await Promise.race([output, input]);
    const exit: RemoteExit = badLine ? { code: 1, signal: null } : raced;
    reader.close(); // the engine is gone: stop reading what the SDK may still write
    await client.close();
    return exit;
  };

  const exited = run().catch(fail);
  return {
    exited,
    stop: (signal) => void requestStop(signal),
  };
}

/** Copies the session's engine frames to the output until the engine exits. */
class Relay {
  private silent = false;

  constructor(
    private readonly session: RemoteSession,
    private readonly io: RemoteEngineIo,
    private readonly log: Logger,
  ) {}

  silence(): void {
    this.silent = true;
  }

  async run(): Promise<RemoteExit> {
    let exit: RemoteExit | undefined;
    try {
      for await (const item of this.session) {
        if ((item.kind === 'engine' && item.origin === 'engine') || item.kind === 'reply') {
          if (!this.silent) await writeLine(this.io.output, item.line);
        } else if (item.kind === 'event' && item.event.subtype === 'exited') {
          const e = item.event;
          if (e.stderr_tail && !this.silent) this.io.diagnostics(e.stderr_tail.endsWith('\n') ? e.stderr_tail : e.stderr_tail + '\n');
          exit = { code: e.code, signal: (e.signal as NodeJS.Signals | null) ?? null };
        } else {
          this.log.debug({ sessionId: this.session.id, item }, 'gateway frame not relayed to the SDK');
        }
      }
    } catch (err) {
      const error = asTetherError(err, 'UNAVAILABLE');
      if (!this.silent) this.io.diagnostics(`tether-claude: lost the remote session: ${error.message}\n`);
      return { code: 1, signal: null, error };
    }
    if (exit) return exit;
    const error = new TetherError('UNAVAILABLE', 'the remote session ended without an exit report');
    this.io.diagnostics(`tether-claude: ${error.message}\n`);
    return { code: 1, signal: null, error };
  }
}

/**
 * Sends every input line to the session, in order. Blank lines and JSON values that are not
 * objects are skipped (the CLI ignores them); a refused line is reported and skipped; a line
 * that is not JSON stops reading ("not-json"), as it would end the CLI.
 */
async function pumpInput(session: RemoteSession, rl: Interface, io: RemoteEngineIo, log: Logger): Promise<'eof' | 'not-json'> {
  // An input stream that fails counts as EOF, like a pipe whose writer died.
  const failed = new Promise<'eof'>((resolve) => io.input.once('error', (err) => {
    log.warn({ err: String(err) }, 'input stream failed; treating it as EOF');
    rl.close();
    resolve('eof');
  }));
  const read = readLines(session, rl, io, log).catch((err) => {
    log.warn({ err: String(err) }, 'reading input failed; treating it as EOF');
    return 'eof' as const;
  });
  return Promise.race([failed, read]);
}

async function readLines(session: RemoteSession, rl: Interface, io: RemoteEngineIo, log: Logger): Promise<'eof' | 'not-json'> {
  for await (const raw of rl) {
    const text = raw.trim();
    if (!text) continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      io.diagnostics(`Error parsing streaming input line (${text.length} chars): ${String(err)}\n`);
      rl.close();
      return 'not-json';
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) continue;
    try {
      await session.send(value as Record<string, unknown>);
    } catch (err) {
      const e = asTetherError(err);
      log.warn({ code: e.code, type: (value as { type?: unknown }).type }, 'input line refused');
      io.diagnostics(`tether-claude: input line refused (${e.code}): ${e.message}\n`);
    }
  }
  return 'eof';
}

/** Writes one line, honouring backpressure; resolves early if the output is gone. */
function writeLine(output: Writable, line: string): Promise<void> {
  if (output.destroyed || output.writableEnded) return Promise.resolve();
  if (output.write(line + '\n')) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      output.off('drain', done);
      output.off('close', done);
      output.off('error', done);
      resolve();
    };
    output.on('drain', done);
    output.on('close', done);
    output.on('error', done);
  });
}

function withBound(p: Promise<void>, ms: number): Promise<void> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<void>((resolve) => (t = setTimeout(resolve, ms)))]).finally(() => clearTimeout(t));
}
