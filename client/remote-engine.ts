/**
 * The SDK drop-in's bridge: one engine on a remote agent, driven as if it were a local
 * `claude` in stream-json mode (argv → session options in session-options-from-argv.ts, input
 * lines through ndjson-input.ts, engine output back through engine-output-copy.ts).
 */
import { asTetherError } from '../core/errors.js';
import type { RemoteEngineIo, RemoteExit } from './remote-engine-io.js';
import type { DialOptions, Dialers } from '../core/link/dial.js';
import { silentLogger, type Logger } from '../core/logging.js';
import type { StopSignal } from '../core/protocol/methods.js';
import { pickSdkEnv } from '../core/protocol/sdk-env.js';
import type { EngineKind, SessionOptions } from '../core/protocol/session-options.js';
import { EngineOutputCopy } from './engine-output-copy.js';
import { GatewayClient } from './gateway-client.js';
import { sendNdjsonInput } from './ndjson-input.js';
import type { RemoteSession } from './remote-session.js';
import { sessionOptionsFromArgs } from './session-options-from-argv.js';

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
  /** The transports it may dial; default: a new standardDialers(). */
  dialers?: Dialers;
  /** Silent by default. Gateway frames and events that are not relayed are logged at debug. */
  logger?: Logger;
  /** Reported to the gateway in hello (default "tether-claude"). */
  software?: string;
}

export type { RemoteEngineIo, RemoteExit };

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
      client = await GatewayClient.connect({
        gateway: target.gateway,
        token: target.token,
        dial: target.dial,
        dialers: target.dialers,
        logger: log,
        reconnect: true,
        software: target.software ?? 'tether-claude',
      });
      session = await client.createSession({
        agent: target.agent,
        engine: target.engine,
        options,
        onProgress: (p) => io.diagnostics(`tether-claude: ${p.message}\n`),
      });
      log.debug({ sessionId: session.id }, 'remote session created');
    } catch (err) {
      await client?.close();
      return fail(err);
    }
    if (stopRequested) void requestStop(stopRequested);
    const relay = new EngineOutputCopy(session, io, log);
    const output = relay.run();
    // Input EOF stops the session and the engine's own exit ends the bridge. A bad input line
    // ends it with exit 1 once the stop is confirmed (or took too long), like the CLI's
    // immediate exit; nothing the engine writes after that line reaches the output. Values
    // that are not objects are skipped, as the CLI skips them.
    let badLine = false;
    const reader = sendNdjsonInput(
      session,
      io.input,
      {
        notJson: (_lineNo, text, err) => {
          io.diagnostics(`Error parsing streaming input line (${text.length} chars): ${String(err)}\n`);
          return 'stop';
        },
        notObject: () => {},
        refused: (_lineNo, line, err) => {
          const e = asTetherError(err);
          log.warn({ code: e.code, type: line.type }, 'input line refused');
          io.diagnostics(`tether-claude: input line refused (${e.code}): ${e.message}\n`);
        },
      },
      log,
    );
    const input = reader.done.then(async (how): Promise<RemoteExit> => {
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

function withBound(p: Promise<void>, ms: number): Promise<void> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<void>((resolve) => (t = setTimeout(resolve, ms)))]).finally(() => clearTimeout(t));
}
