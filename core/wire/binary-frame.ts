import { TetherError } from '../errors.js';
import { BINARY_FRAME_OVERHEAD_BYTES, type BinaryFrame } from './frame.js';

/**
 * The WebSocket layout of a {@link BinaryFrame}: one binary message holding a 4-byte
 * big-endian header length, the header's UTF-8 and then the body's bytes, untouched.
 * (gRPC needs no layout: the header and body are two fields of one Frame.)
 */
const LENGTH_BYTES = BINARY_FRAME_OVERHEAD_BYTES;

/** Largest header a peer may send; ours are a few hundred bytes. */
export const MAX_BINARY_HEADER_BYTES = 64 * 1024;

/**
 * Bodies from this size on are not copied into one Buffer with their header: where the sender
 * may (core/channel/ws.ts writeFrame), the message's one frame is written as its head, the
 * header's bytes, then the body as it is. Below it one Buffer costs less than several writes.
 */
export const UNJOINED_MIN_BYTES = 64 * 1024;

/** Builds the one Buffer a WebSocket binary message carries (copies the body once). */
export function encodeBinaryFrame(frame: BinaryFrame): Buffer {
  const out = withHead(frame.header, frame.body.byteLength);
  out.set(frame.body, out.length - frame.body.byteLength);
  return out;
}

/** A Buffer holding the length prefix and `header`, with `room` bytes left after them. */
function withHead(header: string, room: number): Buffer {
  const headerBytes = Buffer.byteLength(header);
  const out = Buffer.allocUnsafe(LENGTH_BYTES + headerBytes + room);
  out.writeUInt32BE(headerBytes, 0);
  out.write(header, LENGTH_BYTES, 'utf8');
  return out;
}

/**
 * The length prefix and header of a binary message, for a body written after it unjoined
 * (see {@link UNJOINED_MIN_BYTES}): `encodeBinaryHead(f)` followed by `f.body` is
 * `encodeBinaryFrame(f)`.
 */
export function encodeBinaryHead(frame: BinaryFrame): Buffer {
  return withHead(frame.header, 0);
}

/**
 * Reads a binary message back into header and body; the body is a view of `data`, not a
 * copy. Throws INVALID_ARGUMENT for a message too short for its own header length.
 */
export function decodeBinaryFrame(data: Buffer): BinaryFrame {
  if (data.length < LENGTH_BYTES) throw new TetherError('INVALID_ARGUMENT', `binary frame of ${data.length} bytes has no header length`);
  const headerBytes = data.readUInt32BE(0);
  if (headerBytes > MAX_BINARY_HEADER_BYTES || LENGTH_BYTES + headerBytes > data.length) {
    throw new TetherError('INVALID_ARGUMENT', `binary frame header of ${headerBytes} bytes does not fit the ${data.length}-byte message`);
  }
  return {
    header: data.toString('utf8', LENGTH_BYTES, LENGTH_BYTES + headerBytes),
    body: data.subarray(LENGTH_BYTES + headerBytes),
  };
}
