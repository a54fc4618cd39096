import type { Writable } from 'node:stream';
import { asTetherError, TetherError } from '../core/errors.js';
import type { Logger } from '../core/logging.js';
import { INPUT_REFUSED } from '../core/protocol/events.js';
import type { RemoteEngineIo, RemoteExit } from './remote-engine-io.js';
import type { RemoteSession } from './remote-session.js';

/**
 * Copies one remote session's engine output to the SDK's stdout, as a local CLI would write
 * it: the engine's own lines and the replies to the SDK's control requests, byte for byte;
 * gateway frames and tether events stay out (debug log only). Ends when the engine's exit is
 * reported (its stderr tail goes to diagnostics), or the session is lost.
 * (Not the agent's SessionRelay: this is the client end of one bridge.)
 */
export class EngineOutputCopy {
  private silent = false;

  constructor(
    private readonly session: RemoteSession,
    private readonly io: RemoteEngineIo,
    private readonly log: Logger,
  ) {}

  /** From now on nothing more is written, neither output nor diagnostics (the bridge is ending). */
  silence(): void {
    this.silent = true;
  }

  /** Copies until the engine exits; resolves with how it ended. Call once. */
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
        } else if (item.kind === 'event' && item.event.subtype === 'engine_error' && item.event.code === INPUT_REFUSED) {
          // The engine format has no word for a prompt refused before the engine saw it: say why on stderr.
          if (!this.silent) this.io.diagnostics(`tether-claude: ${item.event.message}\n`);
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
