import { TetherError } from '../errors.js';
import { BATCH_MAX_BYTES } from './grpc-batch.js';
import { hasFrameHeadroom } from './session-frame.js';
import { Slabs, type SlabView } from './slabs.js';
import type { TextPieces } from './text-pieces.js';

/**
 * One Frame of tether.v1.Gateway/Connect: a JSON-RPC 2.0 message as text, or (with `data`) a
 * binary frame's header and its bytes. `_data` is proto3's presence marker for `data`.
 */
export interface GatewayFrame {
  json: string;
  data?: Uint8Array;
  _data?: 'data';
  /** Received only: the UTF-8 bytes of `json`, as the message gave them (measuring the string again would scan it). */
  jsonLength?: number;
  /** Received only: the frames of a batch, in order, in place of this one (`json` is then empty, `data` absent). */
  batch?: GatewayFrame[];
  /** Sending only: `json` already encoded as UTF-8 (see encodeFrame). */
  jsonBytes?: Uint8Array;
}

/**
 * The protobuf wire form of tether.v1.Frame (`string json = 1; optional bytes data = 2;
 * repeated Frame batch = 3;`), written by hand because it is small and sits on the hot path: encoding writes each
 * frame with one allocation (proto-loader's encoder copies `data` into a growing buffer and
 * cannot take `json` as bytes), decoding hands `data` out as a view of the received message,
 * not a copy. A test checks both against proto-loader's own codec for the same .proto.
 */

const JSON_TAG = 0x0a; // field 1, length-delimited
const DATA_TAG = 0x12; // field 2, length-delimited
const BATCH_TAG = 0x1a; // field 3, length-delimited: one Frame of a batch

function varintLength(n: number): number {
  let len = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

function writeVarint(out: Buffer, at: number, n: number): number {
  while (n >= 128) {
    out[at++] = (n % 128) | 128;
    n = Math.floor(n / 128);
  }
  out[at++] = n;
  return at;
}

function writeField(out: Buffer, at: number, tag: number, bytes: Uint8Array): number {
  out[at++] = tag;
  at = writeVarint(out, at, bytes.byteLength);
  out.set(bytes, at);
  return at + bytes.byteLength;
}

/**
 * Encodes one Frame: `json` (or `jsonBytes`, its UTF-8 already made) and `data` when present.
 * A large `jsonBytes` made by session-frame.ts is not copied: its tag and length
 * go in the headroom in front of it, and the Frame is a view of the same memory.
 */
export function encodeFrame(frame: GatewayFrame): Buffer {
  const textBytes = frame.jsonBytes;
  if (textBytes && !frame.data && hasFrameHeadroom(textBytes)) return inHeadroom(textBytes);
  const json = textBytes ?? Buffer.from(frame.json ?? '', 'utf8');
  const data = frame.data;
  const size =
    (json.byteLength ? 1 + varintLength(json.byteLength) + json.byteLength : 0) +
    (data ? 1 + varintLength(data.byteLength) + data.byteLength : 0);
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  if (json.byteLength) at = writeField(out, at, JSON_TAG, json); // proto3: an empty string is not written
  if (data) writeField(out, at, DATA_TAG, data); // optional: present even when empty
  return out;
}

/**
 * A Frame encoded by {@link FrameEncoder.encodePieces}: `bytes` stay valid while the holder's
 * reference to `kept` (when set) is held, and are reused after {@link FrameEncoder.release}.
 */
export interface SharedFrame {
  readonly bytes: Buffer;
  readonly kept?: SlabView;
}

/** Emptied slabs an encoder keeps: a reader's backlog that swings by a few MB reuses them. */
const ENCODER_SPARE_SLABS = 4;

/**
 * {@link encodeFrame} for the channels of one listener (it makes one and hands it to each),
 * remembering the last Frame it encoded from `jsonBytes`: the gateway hands one frame to all
 * its clients in one loop, so it is encoded once however many there are (a WeakMap of every
 * frame cost more in lookups and garbage collection than it saved). The bytes must not change
 * once sent, as a frame's never do.
 */
export class FrameEncoder {
  private lastText: Uint8Array | undefined;
  private lastEncoded: Buffer | undefined;
  private readonly slabs = new Slabs(ENCODER_SPARE_SLABS);
  private lastPieces: TextPieces | undefined;
  /** The last frame of {@link encodePieces}, with the encoder's own reference until the next one. */
  private lastShared: SharedFrame | undefined;

  encode(frame: GatewayFrame): Buffer {
    const textBytes = frame.data ? undefined : frame.jsonBytes;
    if (textBytes && textBytes === this.lastText) return this.lastEncoded!;
    const out = encodeFrame(frame);
    if (textBytes) {
      this.lastText = textBytes;
      this.lastEncoded = out;
    }
    return out;
  }

  /**
   * A large text frame in pieces, encoded into a recycled slab (one copy, where joining the
   * pieces was one allocation and a copy), once however many channels send it; each call is a
   * reference the caller gives back with {@link release} once the transport no longer reads
   * the bytes. A slow reader's queue then holds slab memory that is reused, not Buffers that
   * outlive V8's young generation (see core/wire/slabs.ts). Too large for a slab: joined.
   */
  encodePieces(pieces: TextPieces): SharedFrame {
    if (pieces !== this.lastPieces || !this.lastShared) {
      if (this.lastShared?.kept) this.slabs.release(this.lastShared.kept);
      this.lastPieces = pieces;
      this.lastShared = this.keepPieces(pieces);
    }
    if (this.lastShared.kept) this.slabs.retain(this.lastShared.kept);
    return this.lastShared;
  }

  /** Gives back a reference from {@link encodePieces}. */
  release(frame: SharedFrame): void {
    if (frame.kept) this.slabs.release(frame.kept);
  }

  /** A reference from {@link encodePieces} whose bytes may still be read at some unknown time: never reused. */
  forsake(frame: SharedFrame): void {
    if (frame.kept) this.slabs.forsake(frame.kept);
  }

  /** Bytes of slabs held (in use and spare), for tests. */
  get slabBytes(): number {
    return this.slabs.heldBytes;
  }

  private keepPieces(pieces: TextPieces): SharedFrame {
    const n = pieces.byteLength;
    const prefix = Buffer.allocUnsafe(1 + varintLength(n));
    prefix[0] = JSON_TAG;
    writeVarint(prefix, 1, n);
    const size = prefix.length + n;
    if (!Slabs.fits(size)) return { bytes: this.encode({ json: '', jsonBytes: pieces.joined() }) };
    const kept = this.slabs.keep([prefix, ...pieces.pieces], size);
    return { bytes: kept.bytes, kept };
  }
}

/** Bytes one encoded Frame of `length` bytes takes inside a batch (its tag and length prefix included). */
export function batchEntryBytes(length: number): number {
  return 1 + varintLength(length) + length;
}

/**
 * One Frame whose `batch` holds the given Frames (each already encoded by {@link encodeFrame}),
 * in order: one allocation, each frame copied once. `size` is the sum of their
 * {@link batchEntryBytes}.
 */
export function encodeBatch(frames: readonly Uint8Array[], size: number): Buffer {
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const frame of frames) at = writeField(out, at, BATCH_TAG, frame);
  return out;
}

/** `frame` as a Frame's `json` field, its tag and length written in the headroom in front of it (the same bytes every time). */
function inHeadroom(frame: Uint8Array): Buffer {
  const prefix = 1 + varintLength(frame.byteLength); // ≤ 6 ≤ FRAME_HEADROOM_BYTES
  const out = Buffer.from(frame.buffer, frame.byteOffset - prefix, prefix + frame.byteLength);
  writeVarint(out, 1, frame.byteLength);
  out[0] = JSON_TAG;
  return out;
}

function readVarint(buf: Buffer, at: number): [value: number, next: number] {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 8; i++) {
    if (at >= buf.length) break;
    const b = buf[at++];
    value += (b & 0x7f) * scale;
    if (b < 128) return [value, at];
    scale *= 128;
  }
  throw new TetherError('INVALID_ARGUMENT', 'malformed Frame: bad varint');
}

/**
 * Decodes one Frame. `data` (when present) is a view of `buf`, and so is the `data` of each
 * frame of a `batch`. Unknown fields are skipped, as protobuf requires; a truncated or
 * malformed message, or a batch inside a batch, throws INVALID_ARGUMENT.
 */
export function decodeFrame(buf: Buffer): GatewayFrame {
  return decode(buf, true);
}

function decode(buf: Buffer, outer: boolean): GatewayFrame {
  const frame: GatewayFrame = { json: '' };
  let at = 0;
  while (at < buf.length) {
    let tag: number;
    [tag, at] = readVarint(buf, at);
    const wire = tag & 7;
    let len = 0;
    if (wire === 2) [len, at] = readVarint(buf, at);
    else if (wire === 0) [, at] = readVarint(buf, at);
    else if (wire === 1 || wire === 5) len = wire === 1 ? 8 : 4;
    else throw new TetherError('INVALID_ARGUMENT', `malformed Frame: wire type ${wire}`);
    if (at + len > buf.length) throw new TetherError('INVALID_ARGUMENT', 'malformed Frame: field runs past the message');
    if (tag === JSON_TAG) {
      frame.json = buf.toString('utf8', at, at + len);
      frame.jsonLength = len;
    } else if (tag === DATA_TAG) {
      frame.data = buf.subarray(at, at + len);
      frame._data = 'data';
    } else if (tag === BATCH_TAG) {
      // Not recursive beyond one level: a nested batch would let a peer run the stack out.
      if (!outer) throw new TetherError('INVALID_ARGUMENT', 'malformed Frame: a batch inside a batch');
      // Every side offers batches of at most BATCH_MAX_BYTES: a larger one (up to the message
      // limit, 16 MiB of 2-byte empty entries) would be millions of frames from one message.
      if (buf.length > BATCH_MAX_BYTES)
        throw new TetherError('RESOURCE_EXHAUSTED', `a batch of ${buf.length} bytes, over the ${BATCH_MAX_BYTES} bytes every side offers`);
      (frame.batch ??= []).push(decode(buf.subarray(at, at + len), false));
    }
    at += len;
  }
  return frame;
}
