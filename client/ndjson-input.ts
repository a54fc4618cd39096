import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { silentLogger, type Logger } from '../core/logging.js';
import type { RemoteSession } from './remote-session.js';

/** What each caller decides about the lines it cannot send. */
export interface NdjsonInputHandlers {
  /** A line that is not JSON (1-based `lineNo`): return 'stop' to end reading, 'skip' to go on. */
  notJson(lineNo: number, text: string, error: unknown): 'stop' | 'skip';
  /** A JSON value that is not an object (a number, an array, null): it is not sent. */
  notObject(lineNo: number): void;
  /** The session refused a line (or could not take it); reading goes on. */
  refused(lineNo: number, line: Record<string, unknown>, error: unknown): void;
}

/** A running input loop. */
export interface NdjsonInput {
  /**
   * Settles once: 'eof' at the end of the input (a failing input stream counts as its end,
   * like a pipe whose writer died, and so does close()), 'stopped' when `notJson` said stop.
   * Never rejects.
   */
  readonly done: Promise<'eof' | 'stopped'>;
  /** Stops reading; lines not yet read are never sent. Idempotent. */
  close(): void;
}

/**
 * The one NDJSON input loop of the client: reads `input` line by line and sends each JSON
 * object to the session in order, each send awaited before the next line (so order and
 * backpressure hold). Blank lines are skipped; everything else that cannot be sent goes to
 * the caller's `handlers`. Used by pipe mode and by the SDK drop-in's bridge.
 */
export function sendNdjsonInput(
  session: Pick<RemoteSession, 'send'>,
  input: Readable,
  handlers: NdjsonInputHandlers,
  log: Logger = silentLogger,
): NdjsonInput {
  const rl = createInterface({ input, crlfDelay: Infinity });
  const close = (): void => rl.close();
  const failed = new Promise<'eof'>((resolve) =>
    input.once('error', (err) => {
      log.warn({ err: String(err) }, 'input stream failed; treating it as EOF');
      rl.close();
      resolve('eof');
    }),
  );
  const read = async (): Promise<'eof' | 'stopped'> => {
    let lineNo = 0;
    for await (const raw of rl) {
      lineNo++;
      const text = raw.trim();
      if (!text) continue;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (err) {
        if (handlers.notJson(lineNo, text, err) === 'stop') {
          close();
          return 'stopped';
        }
        continue;
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        handlers.notObject(lineNo);
        continue;
      }
      try {
        await session.send(value as Record<string, unknown>);
      } catch (err) {
        handlers.refused(lineNo, value as Record<string, unknown>, err);
      }
    }
    return 'eof';
  };
  const reading = read().catch((err) => {
    log.warn({ err: String(err) }, 'reading input failed; treating it as EOF');
    return 'eof' as const;
  });
  return { done: Promise.race([failed, reading]), close };
}
