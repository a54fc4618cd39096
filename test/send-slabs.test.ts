/**
 * Large frames on their way to gRPC clients lie in recycled slabs (core/wire/slabs.ts), not in
 * a Buffer each: a slow reader's queue of 100 KB frames otherwise outlived V8's young
 * generation and cost full mark-compacts. Slabs count references; a slab is reused only once
 * none is left, never while something may still read it. The listener's FrameEncoder copies a
 * frame's pieces into a slab once for every client; its server channels give their reference
 * back when grpc-js has taken the write. A dialer (whose grpc-js may keep a message past its
 * write callback) keeps its large frames unencoded in its queue instead, encoded as grpc-js takes them.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Channel } from '../core/channel/channel.js';
import { dial } from '../core/link/dial.js';
import { Slabs } from '../core/wire/slabs.js';
import { encodeFrame, FrameEncoder } from '../core/wire/grpc-frame.js';
import { TextPieces } from '../core/wire/text-pieces.js';
import { startGrpcListener } from '../gateway/listen/listen-grpc.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { receiveFrames } from './support/channel-read.js';
import { waitFor, withTimeout } from './support/wait.js';

const KB = 1024;
/** A large text frame in three pieces whose bytes say which it is. */
function bigFrame(i: number, bytes = 100 * KB): TextPieces {
  const head = Buffer.from(`{"n":${i},"pad":"`);
  const tail = Buffer.from('"}');
  return new TextPieces([head, Buffer.alloc(bytes - head.length - tail.length, 97 + (i % 26)), tail]);
}
const sameMemory = (a: Buffer, b: Buffer) => a.buffer === b.buffer && a.byteOffset === b.byteOffset;

/** A gRPC listener and `n` channels dialed to it, with the listener's side of each (bounded: 5 s). */
async function grpcPairs(cleanups: ReturnType<typeof cleanupsPerTest>, n: number): Promise<{ accepted: Channel[]; dialed: Channel[] }> {
  const accepted: Channel[] = [];
  const listener = await startGrpcListener({ host: '127.0.0.1', port: 0, onChannel: (c) => void accepted.push(c) });
  cleanups.push(() => listener.close({ graceMs: 1_000 }));
  const dialed: Channel[] = [];
  for (let i = 0; i < n; i++) {
    const channel = await dial(`grpc://127.0.0.1:${listener.port}`, { connectTimeoutMs: 5_000, token: 'test-token' });
    cleanups.push(() => channel.close());
    dialed.push(channel);
  }
  await waitFor(() => accepted.length === n, 5_000, `the listener to accept ${n} channel(s)`);
  return { accepted, dialed };
}

describe('Slabs', () => {
  it('a slab is refilled only once every reference to every view in it is released', () => {
    const slabs = new Slabs();
    const a = slabs.keep([Buffer.alloc(40 * KB, 1)], 40 * KB);
    slabs.retain(a); // two holders
    slabs.release(a);
    const b = slabs.keep([Buffer.alloc(40 * KB, 2)], 40 * KB);
    expect(b.bytes.buffer).toBe(a.bytes.buffer); // same slab, after a
    expect(b.bytes.byteOffset).toBeGreaterThan(a.bytes.byteOffset);
    slabs.release(b);
    expect(a.bytes.every((x) => x === 1)).toBe(true); // a still held: not overwritten
    slabs.release(a);
    const c = slabs.keep([Buffer.alloc(40 * KB, 3)], 40 * KB);
    expect(sameMemory(c.bytes, a.bytes)).toBe(true); // nothing held: filled again from its start
  });

  it('emptied slabs are kept as spares up to the number asked, and reused', () => {
    const slabs = new Slabs(2);
    const views = [];
    for (let i = 0; i < 4; i++) views.push(slabs.keep([Buffer.alloc(600 * KB)], 600 * KB)); // one slab each (1 MiB at most)
    const buffers = views.map((v) => v.bytes.buffer);
    expect(new Set(buffers).size).toBe(4);
    for (const v of views) slabs.release(v);
    // The last one stays as the slab being filled; two of the three others are spares.
    expect(slabs.heldBytes).toBe(3 * views[0]!.slab.buf.length);
    const next = [slabs.keep([Buffer.alloc(600 * KB)], 600 * KB), slabs.keep([Buffer.alloc(600 * KB)], 600 * KB)];
    expect(next.every((v) => buffers.includes(v.bytes.buffer))).toBe(true);
  });

  it('a forsaken view keeps its slab out of reuse for good', () => {
    const slabs = new Slabs(4);
    const a = slabs.keep([Buffer.alloc(40 * KB, 1)], 40 * KB);
    slabs.forsake(a);
    slabs.release(a);
    const b = slabs.keep([Buffer.alloc(40 * KB, 2)], 40 * KB);
    expect(b.bytes.buffer).not.toBe(a.bytes.buffer);
    expect(a.bytes.every((x) => x === 1)).toBe(true);
    expect(slabs.heldBytes).toBe(b.slab.buf.length); // the forsaken slab is not counted (nor kept)
  });
});

describe('FrameEncoder.encodePieces', () => {
  it('encodes pieces as the Frame of their joined text, once for every caller, into memory reused after the last release', () => {
    const encoder = new FrameEncoder();
    const first = bigFrame(1);
    const a = encoder.encodePieces(first);
    const b = encoder.encodePieces(first);
    expect(b).toBe(a); // a second client: the same bytes
    expect(a.bytes.equals(encodeFrame({ json: '', jsonBytes: Buffer.from(first.joined()) }))).toBe(true);
    // The encoder holds its own reference until the next frame; both clients still hold theirs.
    const second = encoder.encodePieces(bigFrame(2));
    encoder.release(a);
    const third = encoder.encodePieces(bigFrame(3));
    expect(a.bytes.equals(encodeFrame({ json: '', jsonBytes: first.joined() }))).toBe(true); // one client still holds it
    encoder.release(b);
    encoder.release(second);
    encoder.release(third);
    const fourth = encoder.encodePieces(bigFrame(4));
    encoder.release(fourth);
    // Released by all: the slab is reused by a later frame instead of a new allocation.
    const held = encoder.slabBytes;
    const later = encoder.encodePieces(bigFrame(5));
    expect([a, second, third, fourth].some((f) => f.bytes.buffer === later.bytes.buffer)).toBe(true);
    expect(encoder.slabBytes).toBe(held);
  });

  it('a frame too large for a slab is joined and encoded as before, with nothing to give back', () => {
    const encoder = new FrameEncoder();
    const huge = bigFrame(1, 2 * 1024 * KB);
    const joined = vi.spyOn(huge, 'joined');
    const out = encoder.encodePieces(huge);
    expect(out.kept).toBeUndefined();
    expect(joined).toHaveBeenCalled();
    expect(out.bytes.equals(encodeFrame({ json: '', jsonBytes: huge.joined() }))).toBe(true);
  });
});

describe('a gRPC listener sends large text pieces from its slabs', () => {
  const cleanups = cleanupsPerTest();
  afterEach(() => vi.restoreAllMocks());

  it('two clients, one reading late: each gets every frame intact, nothing is joined, and the slabs are reused', async () => {
    const { accepted, dialed } = await grpcPairs(cleanups, 2);
    const joined = vi.spyOn(TextPieces.prototype, 'joined');
    const encoded = vi.spyOn(FrameEncoder.prototype, 'encodePieces');
    const rounds = 3;
    const perRound = 40; // 4 MB a round, queued at the server for the late reader
    for (let r = 0; r < rounds; r++) {
      const frames = Array.from({ length: perRound }, (_, i) => bigFrame(r * perRound + i));
      for (const frame of frames) for (const channel of accepted) expect(channel.post(frame)).toBe(true);
      const expected = frames.map((f) => f.joined().toString());
      joined.mockClear(); // the test's own joins
      const early = await receiveFrames(dialed[0]!, perRound);
      await new Promise((r) => setTimeout(r, 50)); // the second reads late: its frames wait, in slabs
      const late = await receiveFrames(dialed[1]!, perRound);
      expect(early).toEqual(expected);
      expect(late).toEqual(expected);
    }
    expect(joined).not.toHaveBeenCalled();
    const encoder = encoded.mock.contexts[0] as FrameEncoder;
    expect(encoded.mock.contexts.every((c) => c === encoder)).toBe(true); // one encoder for the listener's channels
    // 12 MB sent twice; the slabs held stay around one round's backlog (4 MB), reused round after round.
    expect(encoder.slabBytes).toBeLessThanOrEqual(6 * 1024 * KB);
  });
  it("a client gone with frames still in grpc-js's hands: their slabs are never reused (grpc-js may still read them)", async () => {
    const { accepted, dialed } = await grpcPairs(cleanups, 1);
    const forsaken = vi.spyOn(FrameEncoder.prototype, 'forsake');
    const encoded = vi.spyOn(FrameEncoder.prototype, 'encodePieces');
    // The client never reads: past HTTP/2's window the frames wait in grpc-js and in our queue.
    for (let i = 0; i < 40; i++) accepted[0]!.post(bigFrame(i));
    await new Promise((r) => setImmediate(r));
    const handedOver = encoded.mock.results.map((r) => (r.value as { bytes: Buffer }).bytes);
    dialed[0]!.close('CANCELLED', 'gone');
    await withTimeout(accepted[0]!.closed, 5_000, 'the server side to see the client go');
    await waitFor(() => forsaken.mock.calls.length > 0, 5_000, 'the writes grpc-js held to be forsaken');
    const gone = new Set(forsaken.mock.calls.map(([f]) => f.bytes.buffer));
    // Every later frame of the listener lies elsewhere than any forsaken one.
    const encoder = encoded.mock.contexts[0] as FrameEncoder;
    for (let i = 0; i < 40; i++) {
      const shared = encoder.encodePieces(bigFrame(100 + i));
      expect(gone.has(shared.bytes.buffer)).toBe(false);
      encoder.release(shared);
    }
    expect(handedOver.length).toBeGreaterThan(0);
  });
});

describe("a gRPC dialer's large frames wait unencoded", () => {
  const cleanups = cleanupsPerTest();
  afterEach(() => vi.restoreAllMocks());

  it('a burst of large binary frames is encoded as grpc-js takes each, not when queued, and arrives intact', async () => {
    const { accepted, dialed } = await grpcPairs(cleanups, 1);
    const channel = dialed[0]!;
    const encoded = vi.spyOn(FrameEncoder.prototype, 'encode');
    const n = 60;
    const frames = Array.from({ length: n }, (_, i) => ({ header: `{"n":${i}}`, body: Buffer.alloc(100 * KB, 97 + (i % 26)) }));
    for (const frame of frames) expect(channel.post(frame)).toBe(true);
    // At the end of the turn the channel hands grpc-js frames until it asks to wait (its write
    // buffer holds 16): those are encoded, the rest wait as they were posted.
    await new Promise((r) => setImmediate(r));
    expect(encoded.mock.calls.length).toBeGreaterThan(0);
    expect(encoded.mock.calls.length).toBeLessThan(n / 2);
    const got = await receiveFrames(accepted[0]!, n);
    expect(got).toHaveLength(n);
    got.forEach((frame, i) => {
      expect(typeof frame).toBe('object');
      const { header, body } = frame as { header: string; body: Uint8Array };
      expect(header).toBe(frames[i]!.header);
      expect(Buffer.from(body).equals(frames[i]!.body)).toBe(true);
    });
    expect(encoded).toHaveBeenCalledTimes(n);
    // Small frames are still encoded when queued (they may share a batch).
    encoded.mockClear();
    for (let i = 0; i < 10; i++) channel.post(`{"small":${i}}`);
    expect(encoded).toHaveBeenCalledTimes(10);
    expect(await receiveFrames(accepted[0]!, 10)).toHaveLength(10);
  });
});
