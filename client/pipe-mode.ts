import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { asTetherError } from '../core/errors.js';
import { tetherEvent, type TetherEvent } from '../core/protocol/events.js';
import type { RemoteSession } from './remote-session.js';

export interface PipeOptions {
  /** On input EOF, stop the session (stdin EOF to the engine: it finishes the turn, then exits). */
  stopOnEof: boolean;
}

/**
 * Pipe mode for scripts: JSON lines in (the engine's own input format, each applied with
 * this client's role), one JSON line out per session frame (engine frames exactly as the
 * engine wrote them, gateway events as `{"type":"tether",…}`). Resolves with the exit code:
 * the engine's own when it exits, 0 when the stream ends otherwise.
 */
export async function runPipe(session: RemoteSession, input: Readable, output: Writable, opts: PipeOptions): Promise<number> {
  const write = (text: string) => output.write(text + '\n');
  const event = (e: TetherEvent) => write(JSON.stringify(e));
  let ended = false;
  const inputDone = pumpInput(session, input, event).then(async () => {
    if (!opts.stopOnEof) return;
    // The engine may exit (and the client close) before the stop is answered: not an error.
    await session.stop().catch((err) => ended || event(errorEvent(err, 'eof')));
  });
  let code = 0;
  try {
    for await (const item of session) {
      if (item.kind === 'event') {
        event(item.event);
        if (item.event.subtype === 'exited') {
          code = item.event.code ?? 1;
          ended = true;
        }
      } else {
        write(item.line);
      }
    }
  } catch (err) {
    event(errorEvent(err, 'stream'));
    code = 1;
  }
  void inputDone;
  return code;
}

async function pumpInput(session: RemoteSession, input: Readable, event: (e: TetherEvent) => void): Promise<void> {
  const rl = createInterface({ input, crlfDelay: Infinity });
  let n = 0;
  for await (const raw of rl) {
    n++;
    const text = raw.trim();
    if (!text) continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      event(tetherEvent({ subtype: 'error', code: 'INVALID_ARGUMENT', message: `input line ${n} is not JSON; nothing was sent`, input: `line ${n}` }));
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      event(tetherEvent({ subtype: 'error', code: 'INVALID_ARGUMENT', message: `input line ${n} is not a JSON object; nothing was sent`, input: `line ${n}` }));
      continue;
    }
    try {
      await session.send(value as Record<string, unknown>);
    } catch (err) {
      event(errorEvent(err, `line ${n}`));
    }
  }
}

function errorEvent(err: unknown, input: string): TetherEvent {
  const e = asTetherError(err);
  return tetherEvent({ subtype: 'error', code: e.code, message: e.message, input });
}
