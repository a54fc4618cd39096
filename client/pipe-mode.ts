import type { Readable, Writable } from 'node:stream';
import { asTetherError } from '../core/errors.js';
import { tetherEvent, type TetherEvent } from '../core/protocol/events.js';
import { sendNdjsonInput } from './ndjson-input.js';
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
  const notSent = (lineNo: number, what: string): void => {
    event(
      tetherEvent({
        subtype: 'error',
        code: 'INVALID_ARGUMENT',
        message: `input line ${lineNo} is ${what}; nothing was sent`,
        input: `line ${lineNo}`,
      }),
    );
  };
  const inputDone = sendNdjsonInput(session, input, {
    notJson: (lineNo) => {
      notSent(lineNo, 'not JSON');
      return 'skip';
    },
    notObject: (lineNo) => notSent(lineNo, 'not a JSON object'),
    refused: (lineNo, _line, err) => event(errorEvent(err, `line ${lineNo}`)),
  }).done.then(async () => {
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

function errorEvent(err: unknown, input: string): TetherEvent {
  const e = asTetherError(err);
  return tetherEvent({ subtype: 'error', code: e.code, message: e.message, input });
}
