import { TextPieces } from './text-pieces.js';

/**
 * The one layout of a `session.frame` notification, as the gateway writes it for every client.
 * An engine line is embedded as the raw JSON value of `message`, the last member of `params`,
 * exactly as the engine wrote it: the gateway builds the frame by concatenation (never parsing
 * or escaping the line), a browser reads it with one `JSON.parse`, and our library slices the
 * line back out byte for byte without parsing it (see {@link EngineFrameReader}).
 *
 * ```
 * {"jsonrpc":"2.0","method":"session.frame","params":{"session_id":"S","seq":7,"origin":"engine","message":<line>}}
 * ```
 */
const PREFIX = '{"jsonrpc":"2.0","method":"session.frame","params":{';
const MESSAGE_KEY = ',"message":';
const SUFFIX = '}}';
const SUFFIX_BYTES = Buffer.from(SUFFIX);

export type FrameOrigin = 'engine' | 'gateway';

/**
 * A gateway event, as {@link encodeEventFrame} takes it: a `TetherEvent` (its schema is in
 * core/protocol/events.ts; this folder lies below core/protocol and does not import it).
 */
export interface GatewayEvent {
  readonly type: 'tether';
  readonly subtype: string;
}

/**
 * An encoded frame: one Buffer, or for a large line its pieces (the frame's start, the line as
 * it arrived, the end), never joined on their way to a WebSocket client.
 */
export type FrameBytes = Buffer | TextPieces;

/**
 * Lines from this size on are not copied into their frame: the frame is {@link TextPieces}
 * around the line's own bytes. Below it one Buffer costs less than three fragments.
 */
export const LINE_PIECES_MIN_BYTES = 64 * 1024;

/** Size of an encoded frame in bytes. */
export function frameByteLength(frame: FrameBytes): number {
  return frame instanceof TextPieces ? frame.byteLength : frame.length;
}

/** An encoded frame as one Buffer (pieces joined once, then kept): for readers that parse it. */
export function frameBuffer(frame: FrameBytes): Buffer {
  return frame instanceof TextPieces ? frame.joined() : frame;
}

/**
 * Writes the frames of one session (the gateway keeps one per session): the start all its
 * frames share, the session id escaped, is made once here rather than once per frame.
 */
export class SessionFrameWriter {
  private readonly start: string;

  constructor(readonly sessionId: string) {
    this.start = `${PREFIX}"session_id":${JSON.stringify(sessionId)},"seq":`;
  }

  /**
   * A frame carrying one engine line (or a line the gateway wrote in the engine's format, such
   * as a withdrawal): one Buffer, the line copied once, or from {@link LINE_PIECES_MIN_BYTES} on
   * pieces that hold the line as it is (it must then not change while the frame lives). `line`
   * must be one JSON value (the agent only relays lines that parsed as JSON objects).
   */
  encodeLine(seq: number, origin: FrameOrigin, line: Uint8Array): FrameBytes {
    const head = this.header(seq, origin) + MESSAGE_KEY; // ASCII, but for the session id
    // Joined (for gRPC and the like) with the headroom a transport's prefix may use, like a frame encoded here.
    if (line.byteLength >= LINE_PIECES_MIN_BYTES) return new TextPieces([Buffer.from(head), line, SUFFIX_BYTES], allocFrame);
    const headBytes = Buffer.byteLength(head);
    const out = allocFrame(headBytes + line.byteLength + SUFFIX_BYTES.length);
    out.write(head, 0, 'utf8');
    out.set(line, headBytes);
    out.set(SUFFIX_BYTES, headBytes + line.byteLength);
    return out;
  }

  /**
   * A frame carrying a gateway event (our own small object, serialized here). Its Buffer is its
   * own, not a slice of Node's shared 8 KB pool: an event frame may stay in the replay log for
   * the session's life, and a pooled slice keeps its whole slab alive (an idle session's few
   * events would pin a slab each). Events are rare; engine lines keep the pool.
   */
  encodeEvent(seq: number, event: GatewayEvent): Buffer {
    const text = `${this.header(seq, 'gateway')},"event":${JSON.stringify(event)}${SUFFIX}`;
    const out = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
    out.write(text);
    return out;
  }

  /** The header fields every frame starts with, in this order. */
  private header(seq: number, origin: FrameOrigin): string {
    return `${this.start}${seq},"origin":"${origin}"`;
  }
}

/** One line frame of `sessionId` ({@link SessionFrameWriter.encodeLine}), for a frame written on its own. */
export function encodeLineFrame(sessionId: string, seq: number, origin: FrameOrigin, line: Uint8Array): FrameBytes {
  return new SessionFrameWriter(sessionId).encodeLine(seq, origin, line);
}

/** One event frame of `sessionId` ({@link SessionFrameWriter.encodeEvent}), for a frame written on its own (a gap notice). */
export function encodeEventFrame(sessionId: string, seq: number, event: GatewayEvent): Buffer {
  return new SessionFrameWriter(sessionId).encodeEvent(seq, event);
}

/**
 * Bytes kept free in front of a large frame, so a transport can write its own short prefix
 * there instead of copying the frame behind it (gRPC: the tag and length of the Frame field,
 * core/wire/grpc-frame.ts). Only frames of {@link HEADROOM_FROM_BYTES} and more: smaller
 * Buffers share a pool (nothing in front of them is theirs) and copying them costs little.
 */
export const FRAME_HEADROOM_BYTES = 8;
const HEADROOM_FROM_BYTES = 8 * 1024;
/**
 * The frames allocated with headroom. Module state, but no cache: a mark on each such Buffer
 * that is true whoever asks, set once when it is made and never taken back, and weak (it keeps
 * no frame alive), so writers and encoders of any number of gateways share it safely.
 */
const withHeadroom = new WeakSet<Uint8Array>();

function allocFrame(size: number): Buffer {
  if (size < HEADROOM_FROM_BYTES) return Buffer.allocUnsafe(size);
  const frame = Buffer.allocUnsafe(FRAME_HEADROOM_BYTES + size).subarray(FRAME_HEADROOM_BYTES);
  withHeadroom.add(frame);
  return frame;
}

/** Whether the {@link FRAME_HEADROOM_BYTES} in front of `frame` are free for a transport's prefix (a frame encoded here). */
export function hasFrameHeadroom(frame: Uint8Array): boolean {
  return frame.byteLength >= HEADROOM_FROM_BYTES && withHeadroom.has(frame);
}

/** An engine-line frame read without parsing its line. */
export interface RawLineFrame {
  session_id: string;
  seq: number;
  origin: FrameOrigin;
  /** The line exactly as the engine wrote it. */
  line: string;
}

/** What {@link EngineFrameReader} says of an event frame in the gateway's layout: not a line, for sure. */
const EVENT = 'event';

const ID_START = `${PREFIX}"session_id":"`;
const SEQ_KEY = '","seq":';
const ORIGIN_KEYS = { engine: ',"origin":"engine"' + MESSAGE_KEY, gateway: ',"origin":"gateway"' + MESSAGE_KEY } as const;
const EVENT_KEY = ',"origin":"gateway","event":';

/**
 * Reads the `session.frame` texts of one connection (the client library keeps one per gateway
 * link), remembering the session id it read last: frames come in bursts of one session, and
 * the id need not be copied out again.
 */
export class EngineFrameReader {
  private lastId = '';

  /**
   * Reads a `session.frame` text in the gateway's layout carrying a line, slicing the line out
   * unparsed; `undefined` for any other text (event frames, other messages, another layout),
   * which the caller parses as ordinary JSON-RPC. Only the short header is parsed. The search
   * for `,"message":` cannot stop inside the header's strings: in JSON text a quote inside a
   * string is always escaped, so a comma followed by a bare quote only occurs between members.
   */
  read(text: string): RawLineFrame | undefined {
    if (!text.startsWith(PREFIX) || !text.endsWith(SUFFIX)) return undefined;
    const own = this.readOwnHeader(text);
    return own === EVENT ? undefined : (own ?? readAnyHeader(text));
  }

  /**
   * The header exactly as {@link SessionFrameWriter.encodeLine} writes it, read without
   * JSON.parse (the library reads one per frame); EVENT for an event frame as
   * {@link SessionFrameWriter.encodeEvent} writes it (whose event may well hold a `"message"`
   * of its own); `undefined` for anything else, e.g. an id with escapes.
   */
  private readOwnHeader(text: string): RawLineFrame | typeof EVENT | undefined {
    if (!text.startsWith(ID_START)) return undefined;
    let session_id = this.lastId;
    let idEnd = ID_START.length + session_id.length;
    if (!session_id || !text.startsWith(session_id, ID_START.length) || !text.startsWith(SEQ_KEY, idEnd)) {
      idEnd = text.indexOf(SEQ_KEY, ID_START.length);
      if (idEnd < 0 || idEnd > ID_START.length + 256) return undefined;
      session_id = text.slice(ID_START.length, idEnd);
      if (session_id.includes('\\') || session_id.includes('"')) return undefined;
      this.lastId = session_id;
    }
    let at = idEnd + SEQ_KEY.length;
    let seq = 0;
    const digitsFrom = at;
    for (let c = text.charCodeAt(at); c >= 48 && c <= 57 && at - digitsFrom < 16; c = text.charCodeAt(++at)) seq = seq * 10 + (c - 48);
    if (at === digitsFrom || (text.charCodeAt(digitsFrom) === 48 && at - digitsFrom > 1)) return undefined; // no digits, or a leading zero
    const origin = text.startsWith(ORIGIN_KEYS.engine, at) ? 'engine' : text.startsWith(ORIGIN_KEYS.gateway, at) ? 'gateway' : undefined;
    if (!origin) return text.startsWith(EVENT_KEY, at) ? EVENT : undefined;
    return { session_id, seq, origin, line: text.slice(at + ORIGIN_KEYS[origin].length, text.length - SUFFIX.length) };
  }
}

/** {@link EngineFrameReader.read} of one text on its own (a reader of many keeps an EngineFrameReader). */
export function readEngineFrame(text: string): RawLineFrame | undefined {
  return new EngineFrameReader().read(text);
}

/** Any header of the frame's three fields, in any order or spacing, read with JSON.parse. */
function readAnyHeader(text: string): RawLineFrame | undefined {
  const at = text.indexOf(MESSAGE_KEY, PREFIX.length);
  if (at < 0 || at > PREFIX.length + 512) return undefined; // headers are short; a match further on is inside an event
  let head: { session_id?: unknown; seq?: unknown; origin?: unknown };
  try {
    head = JSON.parse(`${text.slice(PREFIX.length - 1, at)}}`) as typeof head;
  } catch {
    return undefined;
  }
  const { session_id, seq, origin } = head;
  if (Object.keys(head).length !== 3) return undefined; // `,"message":` of something nested, not the line
  if (typeof session_id !== 'string' || typeof seq !== 'number' || (origin !== 'engine' && origin !== 'gateway')) return undefined;
  return { session_id, seq, origin, line: text.slice(at + MESSAGE_KEY.length, text.length - SUFFIX.length) };
}
