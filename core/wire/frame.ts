import { TextPieces } from './text-pieces.js';

/**
 * What a frame is, on every transport: JSON text, or a {@link BinaryFrame}; and what it weighs
 * against a channel's `maxFrameBytes`. The channels (core/channel/) carry these; the codecs of
 * this folder lay them out on each wire.
 */

/**
 * A frame that carries bytes beside a small JSON header: an engine line travels this way,
 * never escaped into JSON text. The header is ours (who, which seq, what kind); the body is
 * opaque to every channel. On WebSocket it is one binary message (binary-frame.ts), on gRPC a
 * `bytes` field beside the header (grpc-frame.ts, proto/tether/v1/gateway.proto).
 */
export interface BinaryFrame {
  readonly header: string;
  readonly body: Uint8Array;
}

/** What a channel carries, and what iterating it yields: JSON text, or a header with bytes. */
export type WireFrame = string | BinaryFrame;

/**
 * What an adapter writes: a WireFrame, or JSON text already encoded as UTF-8 bytes (sent as a
 * text frame and received as a string), so one encoding can serve every client.
 */
export type OutgoingFrame = WireFrame | Uint8Array;

/** What send() and post() take: an OutgoingFrame, or JSON text in {@link TextPieces}. */
export type SendableFrame = OutgoingFrame | TextPieces;

/**
 * What a binary frame costs beyond its header and body, on every transport alike: the length
 * prefix of the WebSocket layout. Counting it everywhere lets WebSocket's own `maxPayload`
 * enforce the one limit for text and binary frames.
 */
export const BINARY_FRAME_OVERHEAD_BYTES = 4;

/** Size of a frame against `maxFrameBytes`: UTF-8 bytes for text; header + body + overhead for binary. */
export function frameBytes(frame: SendableFrame): number {
  if (typeof frame === 'string') return Buffer.byteLength(frame);
  if (frame instanceof Uint8Array || frame instanceof TextPieces) return frame.byteLength;
  return BINARY_FRAME_OVERHEAD_BYTES + Buffer.byteLength(frame.header) + frame.body.byteLength;
}
