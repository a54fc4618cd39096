import { isAscii, isUtf8 } from 'node:buffer';

/**
 * Byte-level NDJSON splitting and decoding of the engine's stdout (engine-protocol.md §2,
 * threats.md G1/G2). Pure: no I/O, no timers, so it can be fuzzed on its own.
 */

/** Why a stdout line was not a frame. */
export type InvalidLineCode = 'NOT_JSON' | 'NOT_OBJECT' | 'LINE_TOO_LONG' | 'INVALID_UTF8';

/**
 * One item read from the engine's stdout.
 *
 * - `frame`: a line that decoded as UTF-8 and parsed as a JSON object. `line` is the exact text
 *   the engine wrote, without the trailing `\n` (a trailing `\r` is stripped too), and `bytes`
 *   the same line as the engine's bytes (a view of what was read, not a copy); forward those
 *   unchanged rather than re-serialising `value`.
 * - `invalid`: a line that is not a frame. `preview` is at most 200 characters, with control,
 *   bidi and other invisible characters escaped (safe to log or to put in a frame); for
 *   INVALID_UTF8 it is the lowercase hex of the first bytes instead. `bytes` is the line's
 *   length in bytes (without `\n`); for LINE_TOO_LONG it is the number of bytes seen when the cap
 *   was crossed (a lower bound: the rest of the line is discarded unseen).
 */
export type EngineLine =
  | { kind: 'frame'; line: string; bytes: Buffer; value: Record<string, unknown> }
  | { kind: 'invalid'; code: InvalidLineCode; message: string; preview: string; bytes: number };

/** Default cap on one stdout line: 16 MiB (threats.md part 3). */
export const DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024;

/** Upper bound on {@link EngineLine} `preview` lengths, in UTF-16 code units. */
export const PREVIEW_MAX_CHARS = 200;

const NL = 0x0a;
const CR = 0x0d;

/**
 * Splits a byte stream on `\n` and turns each line into an {@link EngineLine}.
 *
 * Contract: never holds more than `maxLineBytes` bytes of an unfinished line. When a line grows
 * past the cap, one LINE_TOO_LONG item is emitted at once (so a never-ending line is reported,
 * not a silent wedge) and the rest of that line, up to its `\n`, is dropped without buffering;
 * the next line is read normally. Empty and whitespace-only lines yield nothing. The cap counts
 * the bytes between two `\n` (a trailing `\r` included).
 */
export class LineSplitter {
  private readonly maxLineBytes: number;
  private parts: Buffer[] = [];
  private pending = 0;
  private discarding = false;

  constructor(maxLineBytes: number = DEFAULT_MAX_LINE_BYTES) {
    if (!Number.isSafeInteger(maxLineBytes) || maxLineBytes < 1) {
      throw new RangeError(`maxLineBytes must be a positive integer, got ${maxLineBytes}`);
    }
    this.maxLineBytes = maxLineBytes;
  }

  /** Bytes of the current unfinished line held in memory (always ≤ maxLineBytes). */
  get bufferedBytes(): number {
    return this.pending;
  }

  /** Feeds one chunk; appends every item it completes to `out` (in order) and returns `out`. */
  push(chunk: Uint8Array, out: EngineLine[] = []): EngineLine[] {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let start = 0;
    while (start < buf.length) {
      const nl = buf.indexOf(NL, start);
      const stop = nl === -1 ? buf.length : nl;
      const segLen = stop - start;
      if (!this.discarding && segLen > 0) {
        if (this.pending + segLen > this.maxLineBytes) {
          out.push(tooLong(this.parts, buf.subarray(start, stop), this.pending + segLen, this.maxLineBytes));
          this.parts = [];
          this.pending = 0;
          this.discarding = true;
        } else {
          this.parts.push(buf.subarray(start, stop));
          this.pending += segLen;
        }
      }
      if (nl === -1) break;
      if (!this.discarding) this.emit(out);
      this.parts = [];
      this.pending = 0;
      this.discarding = false;
      start = nl + 1;
    }
    return out;
  }

  /** Call at end of stream: a final line without `\n` is decoded like any other. */
  end(out: EngineLine[] = []): EngineLine[] {
    if (!this.discarding && this.pending > 0) this.emit(out);
    this.parts = [];
    this.pending = 0;
    this.discarding = false;
    return out;
  }

  private emit(out: EngineLine[]): void {
    if (this.pending === 0) return;
    const line = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.pending);
    const item = decodeLine(line);
    if (item) out.push(item);
  }
}

/**
 * The line as text, or undefined when it is not UTF-8 (encoded surrogates included), as a
 * fatal TextDecoder that keeps a BOM would say, at a fraction of its cost: ASCII (most lines)
 * is copied byte for byte, anything else checked first.
 */
function utf8Text(body: Buffer): string | undefined {
  if (isAscii(body)) return body.toString('latin1');
  return isUtf8(body) ? body.toString('utf8') : undefined;
}

/**
 * Decodes one line (without its `\n`) into an {@link EngineLine}; `null` for an empty or
 * whitespace-only line. A trailing `\r` is stripped. Invalid UTF-8 (including encoded
 * surrogates) → INVALID_UTF8; not JSON → NOT_JSON; JSON that is not an object → NOT_OBJECT.
 */
export function decodeLine(raw: Uint8Array): EngineLine | null {
  const bytes = raw.length;
  const len = bytes > 0 && raw[bytes - 1] === CR ? bytes - 1 : bytes;
  if (isBlank(raw, len)) return null;
  const body = Buffer.from(raw.buffer, raw.byteOffset, len);
  const text = utf8Text(body);
  if (text === undefined) return invalid('INVALID_UTF8', 'engine wrote a line that is not valid UTF-8', hexPreview(body), bytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return invalid('NOT_JSON', 'engine wrote a line that is not JSON', safePreview(text), bytes);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const what = value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`;
    return invalid('NOT_OBJECT', `engine wrote JSON that is not an object (${what})`, safePreview(text), bytes);
  }
  return { kind: 'frame', line: text, bytes: body, value: value as Record<string, unknown> };
}

function isBlank(buf: Uint8Array, len: number): boolean {
  for (let i = 0; i < len; i++) {
    const b = buf[i];
    if (b !== 0x20 && b !== 0x09 && b !== CR) return false;
  }
  return true;
}

function invalid(code: InvalidLineCode, message: string, preview: string, bytes: number): EngineLine {
  return { kind: 'invalid', code, message, preview, bytes };
}

function tooLong(parts: Buffer[], tail: Buffer, seen: number, cap: number): EngineLine {
  const pieces: Buffer[] = [];
  let have = 0;
  for (const part of [...parts, tail]) {
    if (have >= PREVIEW_MAX_CHARS) break;
    const piece = part.subarray(0, PREVIEW_MAX_CHARS - have);
    pieces.push(piece);
    have += piece.length;
  }
  const head = Buffer.concat(pieces, have);
  const preview = safePreview(head.toString('utf8'));
  return invalid('LINE_TOO_LONG', `engine wrote a line longer than ${cap} bytes; the rest of it was discarded`, preview, seen);
}

/** Lowercase hex of the first bytes, ≤ {@link PREVIEW_MAX_CHARS} characters ('…' when cut). */
export function hexPreview(buf: Uint8Array): string {
  const maxBytes = Math.floor((PREVIEW_MAX_CHARS - 1) / 2);
  const cut = buf.length > maxBytes;
  const hex = Buffer.from(buf.buffer, buf.byteOffset, Math.min(buf.length, maxBytes)).toString('hex');
  return cut ? `${hex}…` : hex;
}

/**
 * A bounded, display-safe rendering of untrusted text: C0/C1 controls, DEL, line/paragraph
 * separators, bidi controls, zero-width characters and the BOM become `\uXXXX`; the result is at
 * most `max` UTF-16 units, ending in '…' when cut (never splitting a surrogate pair).
 */
export function safePreview(text: string, max: number = PREVIEW_MAX_CHARS): string {
  const pieces: string[] = [];
  let len = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    const piece = isUnsafe(cp) ? `\\u${cp.toString(16).padStart(4, '0')}` : ch;
    if (len + piece.length > max) {
      while (pieces.length > 0 && len + 1 > max) len -= pieces.pop()!.length;
      return `${pieces.join('')}…`;
    }
    pieces.push(piece);
    len += piece.length;
  }
  return pieces.join('');
}

function isUnsafe(cp: number): boolean {
  return (
    cp < 0x20 ||
    (cp >= 0x7f && cp <= 0x9f) ||
    (cp >= 0x200b && cp <= 0x200f) ||
    (cp >= 0x2028 && cp <= 0x202e) ||
    (cp >= 0x2060 && cp <= 0x2069) ||
    cp === 0xfeff ||
    (cp >= 0xd800 && cp <= 0xdfff)
  );
}
