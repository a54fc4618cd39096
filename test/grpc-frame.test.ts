/**
 * Our hand-written codec of tether.v1.Frame agrees with proto-loader's (protobufjs) for the
 * same .proto, both ways, for any text and bytes; it skips unknown fields and refuses
 * malformed messages with a typed error.
 */
import { loadSync, type MethodDefinition } from '@grpc/proto-loader';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { batchEntryBytes, decodeFrame, encodeBatch, encodeFrame, FrameEncoder, type GatewayFrame } from '../core/wire/grpc-frame.js';
import { BATCH_MAX_BYTES } from '../core/wire/grpc-batch.js';
import { findProtoRoot, PROTO_LOADER_OPTIONS } from '../core/channel/proto.js';
import { TetherError } from '../core/errors.js';
import { encodeLineFrame, frameBuffer, hasFrameHeadroom } from '../core/wire/session-frame.js';

const reference = (() => {
  const pkg = loadSync('tether/v1/gateway.proto', { ...PROTO_LOADER_OPTIONS, includeDirs: [findProtoRoot()] });
  const connect = (pkg['tether.v1.Gateway'] as Record<string, MethodDefinition<GatewayFrame, GatewayFrame>>).Connect;
  return { encode: connect.requestSerialize, decode: connect.requestDeserialize };
})();

const frames = fc.record({
  json: fc.string({ unit: 'binary', maxLength: 300 }),
  data: fc.option(fc.uint8Array({ maxLength: 300 }), { nil: undefined }),
});
const plain = (f: GatewayFrame) => ({ json: f.json, data: f.data === undefined ? undefined : Buffer.from(f.data).toString('hex') });

describe('Frame codec', () => {
  it('encodes what protobufjs decodes, and decodes what it encodes, for any text and bytes', () => {
    fc.assert(
      fc.property(frames, ({ json, data }) => {
        const frame: GatewayFrame = data === undefined ? { json } : { json, data };
        expect(plain(reference.decode(encodeFrame(frame)))).toEqual(plain(frame));
        expect(plain(decodeFrame(reference.encode(frame)))).toEqual(plain(frame));
        // The decoder reports the text's UTF-8 size from the message (the channel's limit check uses it).
        expect(decodeFrame(reference.encode(frame)).jsonLength ?? 0).toBe(Buffer.byteLength(json));
        // Text given as its UTF-8 bytes encodes exactly as the string does.
        expect(encodeFrame({ json: '', jsonBytes: Buffer.from(json), ...(data ? { data } : {}) }).equals(encodeFrame(frame))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('a large frame (1 MiB of data, multi-byte varints) round-trips, data as a view of the message', () => {
    const data = Buffer.alloc(1024 * 1024 + 3, 7);
    const wire = encodeFrame({ json: '{"method":"session.output"}', data });
    const back = decodeFrame(wire);
    expect(back.json).toBe('{"method":"session.output"}');
    expect(Buffer.from(back.data!).equals(data)).toBe(true);
    expect(back.data!.buffer).toBe(wire.buffer);
    expect(plain(reference.decode(wire))).toEqual(plain(back));
  });

  it('a large session frame is encoded in place: its tag and length go in the headroom in front of it, no copy', () => {
    for (const size of [9 * 1024, 100_000, 3 * 1024 * 1024]) {
      const line = Buffer.from(`{"type":"assistant","pad":"${'z'.repeat(size)}"}`);
      const frame = frameBuffer(encodeLineFrame('s-1', 7, 'engine', line)); // a large line's pieces, joined as a gRPC channel gets them
      expect(hasFrameHeadroom(frame)).toBe(true);
      const wire = encodeFrame({ json: '', jsonBytes: frame });
      expect(wire.buffer).toBe(frame.buffer); // the same memory…
      expect(wire.byteOffset + wire.length).toBe(frame.byteOffset + frame.length);
      expect(wire.equals(encodeFrame({ json: frame.toString() }))).toBe(true); // …the same Frame as a copy would be
      expect(reference.decode(wire).json).toBe(frame.toString());
      expect(encodeFrame({ json: '', jsonBytes: frame }).equals(wire)).toBe(true); // again: the same bytes
    }
    // Small frames share Buffer's pool (what is in front of them is not theirs): copied.
    const small = frameBuffer(encodeLineFrame('s-1', 8, 'engine', Buffer.from('{"type":"assistant"}')));
    expect(hasFrameHeadroom(small)).toBe(false);
    const copied = encodeFrame({ json: '', jsonBytes: small });
    expect(copied.buffer === small.buffer && copied.byteOffset + copied.length === small.byteOffset + small.length).toBe(false);
    // A Buffer that merely looks like one (own memory, free bytes in front) is not written into.
    const lookalike = Buffer.alloc(8 + 20_000, 0x20).subarray(8);
    const before = Buffer.from(lookalike.buffer).subarray(0, 8).toString('hex');
    encodeFrame({ json: '', jsonBytes: lookalike });
    expect(Buffer.from(lookalike.buffer).subarray(0, 8).toString('hex')).toBe(before);
  });

  it('an encoder encodes the same jsonBytes once, however many times (and channels) it is sent; each encoder keeps its own', () => {
    const bytes = Buffer.from('{"jsonrpc":"2.0"}');
    const other = Buffer.from('{"jsonrpc":"2.0","id":1}');
    const [listener, elsewhere] = [new FrameEncoder(), new FrameEncoder()];
    const once = listener.encode({ json: '', jsonBytes: bytes });
    expect(listener.encode({ json: '', jsonBytes: bytes })).toBe(once);
    expect(once.equals(encodeFrame({ json: '', jsonBytes: bytes }))).toBe(true);
    // Another encoder (another listener) neither sees nor disturbs what this one remembers.
    const theirs = elsewhere.encode({ json: '', jsonBytes: other });
    expect(theirs).not.toBe(once);
    expect(listener.encode({ json: '', jsonBytes: bytes })).toBe(once);
    // A new frame replaces the one remembered; a binary frame (with data) is never remembered.
    const next = listener.encode({ json: '', jsonBytes: other });
    expect(next.equals(theirs)).toBe(true);
    expect(listener.encode({ json: '', jsonBytes: bytes })).not.toBe(once);
    const binary = { json: '{}', jsonBytes: bytes, data: Buffer.from('x') };
    expect(listener.encode(binary)).not.toBe(listener.encode(binary));
    // encodeFrame itself remembers nothing.
    expect(encodeFrame({ json: '', jsonBytes: bytes })).not.toBe(encodeFrame({ json: '', jsonBytes: bytes }));
  });

  it('a batch is a Frame whose repeated `batch` holds the frames, in order, as protobufjs reads and writes it', () => {
    fc.assert(
      fc.property(fc.array(frames, { minLength: 1, maxLength: 8 }), (list) => {
        const batch: GatewayFrame[] = list.map(({ json, data }) => (data === undefined ? { json } : { json, data }));
        const encoded = batch.map((f) => encodeFrame(f));
        const wire = encodeBatch(
          encoded,
          encoded.reduce((n, e) => n + batchEntryBytes(e.length), 0),
        );
        const theirs = reference.decode(wire);
        expect(theirs.json).toBe('');
        expect(theirs.batch!.map(plain)).toEqual(batch.map(plain));
        const ours = decodeFrame(reference.encode({ json: '', batch }));
        expect(ours.batch!.map(plain)).toEqual(batch.map(plain));
        expect(decodeFrame(wire).batch!.map(plain)).toEqual(batch.map(plain));
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a batch inside a batch (a peer could otherwise nest until the stack runs out)', () => {
    const inner = encodeBatch([encodeFrame({ json: 'x' })], batchEntryBytes(encodeFrame({ json: 'x' }).length));
    const outer = encodeBatch([inner], batchEntryBytes(inner.length));
    expect(decodeFrame(inner).batch!.map(plain)).toEqual([{ json: 'x', data: undefined }]);
    expect(() => decodeFrame(outer)).toThrow(/batch inside a batch/);
  });

  it('refuses a batch over the largest any side offers: one message must not become millions of frames', () => {
    const empty = encodeFrame({ json: '' });
    const entries = (n: number) => Array.from({ length: n }, () => empty);
    const fits = BATCH_MAX_BYTES / batchEntryBytes(empty.length);
    expect(decodeFrame(encodeBatch(entries(fits), fits * batchEntryBytes(empty.length))).batch).toHaveLength(fits);
    const over = encodeBatch(entries(fits + 1), (fits + 1) * batchEntryBytes(empty.length));
    expect(() => decodeFrame(over)).toThrow(expect.objectContaining({ code: 'RESOURCE_EXHAUSTED' }));
  });

  it('skips unknown fields and refuses truncated or malformed messages', () => {
    const known = encodeFrame({ json: 'x', data: Buffer.from('y') });
    const unknown = Buffer.from([0x18, 0x96, 0x01, 0x25, 1, 2, 3, 4, 0x29, 1, 2, 3, 4, 5, 6, 7, 8, 0x32, 2, 9, 9]); // fields 3 (varint), 4 (fixed32), 5 (fixed64), 6 (bytes)
    expect(plain(decodeFrame(Buffer.concat([unknown, known])))).toEqual({ json: 'x', data: Buffer.from('y').toString('hex') });
    for (const bad of [
      Buffer.from([0x0a, 5, 1]),
      Buffer.from([0x0a]),
      Buffer.from([0x0b]),
      Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
    ]) {
      expect(() => decodeFrame(bad)).toThrow(TetherError);
    }
  });
});
