/**
 * The Channel contract, written once and run for every transport (memory, ws, grpc): ordering,
 * the frame size limit both ways, send after close, close from either side, iteration after
 * close, abrupt loss, pending sends at close, and a slow consumer. Every wait is bounded.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Channel, CloseInfo, Transport } from '../core/channel/channel.js';
import type { BinaryFrame, WireFrame } from '../core/wire/frame.js';
import { CHANNEL_DEFAULTS } from '../core/channel/channel.js';
import { BINARY_FRAME_OVERHEAD_BYTES, frameBytes } from '../core/wire/frame.js';
import { TetherError } from '../core/errors.js';
import { PAIR_FACTORIES, type ChannelPair, type PairOptions } from './support/channel-pairs.js';
import { steady, waitFor, withTimeout } from './support/wait.js';

const TRANSPORTS: Transport[] = ['memory', 'ws', 'grpc'];
const SMALL_LIMIT = 64 * 1024;

/** Pulls up to `n` frames (fewer if iteration ends) into `out` as they come, within `ms`. */
function take(channel: Channel, n: number, ms = 5_000, out: WireFrame[] = []): Promise<WireFrame[]> {
  const it = channel[Symbol.asyncIterator]();
  const run = async () => {
    while (out.length < n) {
      const next = await it.next();
      if (next.done) break;
      out.push(next.value);
    }
    return out;
  };
  return withTimeout(run(), ms, `receive ${n} frames (got ${out.length})`);
}

/** Pulls until iteration ends, within `ms`. */
function drain(channel: Channel, ms = 5_000, out: WireFrame[] = []): Promise<WireFrame[]> {
  return take(channel, Number.POSITIVE_INFINITY, ms, out);
}

function closedOf(channel: Channel, what: string, ms = 5_000): Promise<CloseInfo> {
  return withTimeout(channel.closed, ms, `${what} closed`);
}

/** A JSON-RPC notification of exactly `bytes` bytes of UTF-8, with some 2-byte characters. */
function frameOfBytes(bytes: number, tag = 'f'): string {
  const head = `{"jsonrpc":"2.0","method":"${tag}","params":{"s":"`;
  const tail = '"}}';
  const room = bytes - Buffer.byteLength(head + tail);
  const twoByte = Math.min(100, Math.floor(room / 4));
  const body = 'é'.repeat(twoByte) + 'x'.repeat(room - 2 * twoByte);
  const frame = head + body + tail;
  expect(Buffer.byteLength(frame)).toBe(bytes);
  return frame;
}

/**
 * A binary frame of exactly `bytes` bytes (header + body) whose body holds every byte value,
 * invalid UTF-8 and NUL included: a channel must hand the body over untouched.
 */
function binaryOfBytes(bytes: number, i = 0): BinaryFrame {
  const header = JSON.stringify({ s: 'sess', q: i });
  const body = Buffer.alloc(bytes - BINARY_FRAME_OVERHEAD_BYTES - Buffer.byteLength(header));
  for (let k = 0; k < body.length; k++) body[k] = (k * 7 + i) & 0xff;
  return { header, body };
}

/** Binary frames compared by value (a received body is a Buffer view, a sent one may not be). */
const plain = (frames: WireFrame[]) =>
  frames.map((f) => (typeof f === 'string' ? f : { header: f.header, body: Buffer.from(f.body).toString('hex') }));

const notification = (i: number, tag = 'n') => JSON.stringify({ jsonrpc: '2.0', method: tag, params: { i } });

/** Both ends closed by the link's loss: UNAVAILABLE or CANCELLED (never OK), by the peer, signal aborted. */
async function expectLostOnBothSides(p: ChannelPair): Promise<void> {
  for (const [side, channel] of [
    ['server', p.server],
    ['client', p.client],
  ] as const) {
    const info = await closedOf(channel, side);
    expect(['UNAVAILABLE', 'CANCELLED']).toContain(info.code);
    expect(info.byPeer).toBe(true);
    expect(channel.signal.aborted).toBe(true);
  }
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  const err = await withTimeout(
    promise.then(
      () => undefined,
      (e: unknown) => e,
    ),
    5_000,
    `rejection with ${code}`,
  );
  expect(err).toBeInstanceOf(TetherError);
  expect((err as TetherError).code).toBe(code);
}

describe.each(TRANSPORTS)('Channel conformance: %s', (transport) => {
  let pair: ChannelPair | undefined;

  const open = async (opts: PairOptions = {}): Promise<ChannelPair> => {
    pair = await withTimeout(PAIR_FACTORIES[transport](opts), 5_000, `open a ${transport} pair`);
    expect(pair.server.transport).toBe(transport);
    expect(pair.client.transport).toBe(transport);
    return pair;
  };

  afterEach(async () => {
    const p = pair;
    pair = undefined;
    if (p) await withTimeout(p.cleanup(), 5_000, 'cleanup');
  });

  it('delivers 1000 frames each way, in order', async () => {
    const { server, client } = await open();
    const up = Array.from({ length: 1000 }, (_, i) => notification(i, 'up'));
    const down = Array.from({ length: 1000 }, (_, i) => notification(i, 'down'));
    const receivedUp = take(server, up.length);
    const receivedDown = take(client, down.length);
    const sends = Promise.all([...up.map((f) => client.send(f)), ...down.map((f) => server.send(f))]);
    expect(await receivedUp).toEqual(up);
    expect(await receivedDown).toEqual(down);
    await withTimeout(sends, 5_000, 'all sends resolve');
  });

  it('read() takes what was received without waiting; readable() waits for the next frame and for the close', async () => {
    const { server, client } = await open();
    expect(server.read()).toBeUndefined();
    const frames = Array.from({ length: 50 }, (_, i) => notification(i, 'read'));
    const got: WireFrame[] = [];
    const drained = (async () => {
      while (got.length < frames.length) {
        await server.readable();
        for (let f = server.read(); f !== undefined; f = server.read()) got.push(f);
      }
    })();
    for (const f of frames) void client.send(f);
    await withTimeout(drained, 5_000, 'read every frame');
    expect(got).toEqual(frames);
    const atClose = server.readable();
    client.close();
    await withTimeout(atClose, 5_000, 'readable() to resolve at the close');
    await closedOf(server, 'server');
    expect(server.read()).toBeUndefined();
    await withTimeout(server.readable(), 1_000, 'readable() of a closed channel');
  });

  it('post() delivers in order with send(), refuses a frame over the limit and anything after close', async () => {
    const { server, client } = await open({ maxFrameBytes: SMALL_LIMIT });
    const frames = Array.from({ length: 200 }, (_, i) => notification(i, 'post'));
    const received = take(client, frames.length);
    frames.forEach((f, i) => (i % 2 ? expect(server.post(f)).toBe(true) : void server.send(f)));
    expect(await received).toEqual(frames);
    expect(server.post(frameOfBytes(SMALL_LIMIT + 1))).toBe(false);
    server.close();
    expect(server.post('{}')).toBe(false);
  });

  it.each(['text', 'binary'] as const)(
    'carries a %s frame of exactly maxFrameBytes intact; send() and post() refuse one byte more and the channel stays usable',
    async (kind) => {
      const { server, client } = await open({ maxFrameBytes: SMALL_LIMIT });
      expect(client.maxFrameBytes).toBe(SMALL_LIMIT);
      expect(server.maxFrameBytes).toBe(SMALL_LIMIT);
      const make = (bytes: number): WireFrame => (kind === 'text' ? frameOfBytes(bytes) : binaryOfBytes(bytes));
      const atLimit = make(SMALL_LIMIT);
      const over = make(SMALL_LIMIT + 1);
      expect(frameBytes(atLimit)).toBe(SMALL_LIMIT);
      for (const [from, to] of [
        [client, server],
        [server, client],
      ] as const) {
        const received = take(to, 2);
        await withTimeout(from.send(atLimit), 5_000, 'send at the limit');
        await expectCode(from.send(over), 'RESOURCE_EXHAUSTED');
        expect(from.post(over)).toBe(false);
        await withTimeout(from.send(notification(1)), 5_000, 'send after a refused frame');
        expect(plain(await received)).toEqual(plain([atLimit, notification(1)]));
      }
      expect(client.isClosed || server.isClosed).toBe(false);
    },
  );

  it('closes with RESOURCE_EXHAUSTED on both sides when the peer sends a frame over our limit', async () => {
    const { server, client } = await open({ serverMaxFrameBytes: SMALL_LIMIT / 4, clientMaxFrameBytes: SMALL_LIMIT });
    void client.send(frameOfBytes(SMALL_LIMIT / 4 + 1)).catch(() => {});
    expect((await closedOf(server, 'receiver')).code).toBe('RESOURCE_EXHAUSTED');
    expect(await closedOf(client, 'sender')).toMatchObject({ code: 'RESOURCE_EXHAUSTED', byPeer: true });
    await expectCode(client.send('{}'), 'FAILED_PRECONDITION');
  });

  it('closes the dialing side with RESOURCE_EXHAUSTED when the accepting side sends it a frame over its limit', async () => {
    const { server, client } = await open({ serverMaxFrameBytes: SMALL_LIMIT, clientMaxFrameBytes: SMALL_LIMIT / 4 });
    void server.send(frameOfBytes(SMALL_LIMIT / 4 + 1)).catch(() => {});
    expect((await closedOf(client, 'receiver')).code).toBe('RESOURCE_EXHAUSTED');
    // The sender learns the link is gone (over gRPC a client can only cancel: CANCELLED).
    expect((await closedOf(server, 'sender')).byPeer).toBe(true);
  });

  it('carries binary frames (header + opaque bytes) in order with text frames, each way, bytes untouched', async () => {
    const { server, client } = await open();
    const mixed = (tag: string) =>
      Array.from({ length: 400 }, (_, i): WireFrame => (i % 3 ? binaryOfBytes(64 + (i % 50) * 37, i) : notification(i, tag)));
    const up = mixed('up');
    const down = mixed('down');
    const receivedUp = take(server, up.length);
    const receivedDown = take(client, down.length);
    const sends = Promise.all([
      ...up.map((f) => client.send(f)),
      ...down.map((f, i) => (i % 2 ? Promise.resolve(void server.post(f)) : server.send(f))),
    ]);
    expect(plain(await receivedUp)).toEqual(plain(up));
    expect(plain(await receivedDown)).toEqual(plain(down));
    await withTimeout(sends, 5_000, 'all sends resolve');
  });

  it('sends JSON text given as UTF-8 bytes as a text frame: it arrives as the same string, and the same bytes can go out again', async () => {
    const { server, client } = await open({ maxFrameBytes: SMALL_LIMIT });
    const texts = [notification(1, 'bytes'), frameOfBytes(SMALL_LIMIT, 'bytes-at-limit'), notification(2, 'é✓😀')];
    const received = take(client, texts.length + 2);
    for (const t of texts) await withTimeout(server.send(Buffer.from(t)), 5_000, 'send bytes');
    expect(server.post(Buffer.from(frameOfBytes(SMALL_LIMIT + 1)))).toBe(false);
    await expectCode(server.send(Buffer.from(frameOfBytes(SMALL_LIMIT + 1))), 'RESOURCE_EXHAUSTED');
    const shared = Buffer.from(notification(3, 'shared'));
    expect(server.post(shared)).toBe(true);
    expect(server.post(shared)).toBe(true);
    expect(await received).toEqual([...texts, notification(3, 'shared'), notification(3, 'shared')]);
  });

  it('closes with RESOURCE_EXHAUSTED when the peer sends a binary frame over our limit', async () => {
    const { server, client } = await open({ serverMaxFrameBytes: SMALL_LIMIT / 4, clientMaxFrameBytes: SMALL_LIMIT });
    void client.send(binaryOfBytes(SMALL_LIMIT / 4 + 1)).catch(() => {});
    expect((await closedOf(server, 'receiver')).code).toBe('RESOURCE_EXHAUSTED');
    expect((await closedOf(client, 'sender')).byPeer).toBe(true);
  });

  it('rejects send() after close with FAILED_PRECONDITION, on both sides', async () => {
    const { server, client } = await open();
    client.close();
    await closedOf(server, 'peer');
    await expectCode(client.send('{}'), 'FAILED_PRECONDITION');
    await expectCode(server.send('{}'), 'FAILED_PRECONDITION');
  });

  describe.each(['client', 'server'] as const)('close() called by the %s', (closer) => {
    it('settles closed once on both sides; a second close() is harmless; the peer sees byPeer', async () => {
      const p = await open();
      const [us, peer] = closer === 'client' ? [p.client, p.server] : [p.server, p.client];
      expect(us.isClosed).toBe(false);
      us.close();
      us.close('INTERNAL', 'second close must not count');
      expect(us.isClosed).toBe(true);
      expect(us.signal.aborted).toBe(true);
      expect(await closedOf(us, 'closer')).toEqual({ code: 'OK', reason: 'closed', byPeer: false });
      expect(await closedOf(peer, 'peer')).toMatchObject({ code: 'OK', byPeer: true });
      expect(peer.signal.aborted).toBe(true);
      us.close('UNAVAILABLE');
      peer.close('UNAVAILABLE');
      // Settled exactly once: later calls change nothing.
      expect([us.isClosed, peer.isClosed]).toEqual([true, true]);
      expect(await us.closed).toEqual({ code: 'OK', reason: 'closed', byPeer: false });
      expect(await peer.closed).toMatchObject({ code: 'OK', byPeer: true });
      expect(await drain(us)).toEqual([]);
      expect(await drain(peer)).toEqual([]);
    });
  });

  it('passes the code and reason given to close() on the accepting side to the peer', async () => {
    const { server, client } = await open();
    server.close('PERMISSION_DENIED', 'token revoked');
    expect(await closedOf(client, 'peer')).toEqual({ code: 'PERMISSION_DENIED', reason: 'token revoked', byPeer: true });
    expect(await closedOf(server, 'closer')).toEqual({ code: 'PERMISSION_DENIED', reason: 'token revoked', byPeer: false });
  });

  it('yields the frames received before the close, then ends iteration', async () => {
    const { server, client } = await open();
    const frames = Array.from({ length: 5 }, (_, i) => notification(i));
    await withTimeout(Promise.all(frames.map((f) => server.send(f))), 5_000, 'sends handed over');
    server.close();
    await closedOf(client, 'reader');
    expect(await drain(client)).toEqual(frames);
    // A second iteration after the end yields nothing and ends at once.
    expect(await drain(client)).toEqual([]);
  });

  it('ends an iteration that is waiting when the peer closes', async () => {
    const { server, client } = await open();
    const reading = drain(client); // drain() calls next() in its first, synchronous step: it is waiting now
    server.close();
    expect(await reading).toEqual([]);
  });

  it('ends with UNAVAILABLE or CANCELLED and byPeer on both sides when the link is cut, never hangs', async () => {
    const p = await open();
    const received = take(p.server, 3);
    for (let i = 0; i < 3; i++) await withTimeout(p.client.send(notification(i)), 5_000, 'send before the cut');
    expect(await received).toEqual([0, 1, 2].map((i) => notification(i)));
    const readers = [drain(p.server), drain(p.client)];
    await withTimeout(p.kill(), 5_000, 'cut the link');
    await expectLostOnBothSides(p);
    for (const reader of readers) expect(await reader).toEqual([]);
    await expectCode(p.client.send('{}'), 'FAILED_PRECONDITION');
  });

  it.each(['idle', 'busy'] as const)(
    'ends with UNAVAILABLE or CANCELLED (never OK) on both sides when the network drops while %s; nothing arrives twice',
    async (state) => {
      const p = await open({ viaRelay: true });
      const count = state === 'idle' ? 3 : 200;
      const up = Array.from({ length: count }, (_, i) => notification(i, 'up'));
      const down = Array.from({ length: count }, (_, i) => notification(i, 'down'));
      const got: [WireFrame[], WireFrame[]] = [[], []];
      const readers = [drain(p.server, 5_000, got[0]), drain(p.client, 5_000, got[1])];
      const sends = Promise.all([...up.map((f) => p.client.send(f)), ...down.map((f) => p.server.send(f))].map((s) => s.catch(() => {})));
      if (state === 'idle') {
        await withTimeout(sends, 5_000, 'sends before the cut');
        // Idle: everything sent has been read on both sides before the cut.
        await waitFor(() => got[0].length === count && got[1].length === count, 5_000, 'every frame read before the cut');
      } else {
        // Busy: the first frames have been read and the rest are on their way when the cut comes.
        await waitFor(() => got[0].length > 0 || got[1].length > 0, 5_000, 'the first frames read');
      }
      await withTimeout(p.cut(), 5_000, 'cut the network');
      await expectLostOnBothSides(p);
      const [atServer, atClient] = await Promise.all(readers);
      expect(atServer).toEqual(up.slice(0, atServer!.length));
      expect(atClient).toEqual(down.slice(0, atClient!.length));
      if (state === 'idle') expect([atServer!.length, atClient!.length]).toEqual([count, count]);
      await withTimeout(sends, 6_000, 'every send settles after the cut');
    },
  );

  describe.each(['client', 'server'] as const)('slow consumer on the %s side', (slow) => {
    const FRAME = 256 * 1024;
    const COUNT = 128; // 32 MiB: beyond the receiver's queue (8 MiB) plus socket and HTTP/2 buffers
    const BACKLOG = 2 * 1024 * 1024;

    it('pushes back on the sender while the receiver stays bounded, then delivers everything in order', async () => {
      const p = await open();
      const [sender, receiver] = slow === 'server' ? [p.client, p.server] : [p.server, p.client];
      const frames = Array.from({ length: COUNT }, (_, i) =>
        JSON.stringify({ jsonrpc: '2.0', method: 'chunk', params: { i, pad: 'x'.repeat(FRAME) } }),
      );
      let resolved = 0;
      const sends = frames.map((f) => sender.send(f).then(() => void resolved++));

      await waitFor(() => sender.bufferedBytes > BACKLOG, 10_000, `sender backlog over ${BACKLOG} bytes`);
      // Backpressure has held once nothing moves any more: the receiver's queue stopped growing.
      await steady(() => receiver.inboundQueuedBytes, 10_000, 'the receiver queue to stop growing');
      expect(sender.bufferedBytes).toBeGreaterThan(BACKLOG);
      expect(resolved).toBeLessThan(COUNT);
      const frameLength = frames[0]!.length;
      expect(receiver.inboundQueuedBytes).toBeLessThanOrEqual(CHANNEL_DEFAULTS.inboundHighWaterBytes + 4 * frameLength);

      const received = await take(receiver, COUNT, 15_000);
      expect(received.length).toBe(COUNT);
      expect(received.every((f, i) => f === frames[i])).toBe(true);
      await withTimeout(Promise.all(sends), 5_000, 'every send resolves once the receiver reads');
      expect(sender.bufferedBytes).toBe(0);
    });

    it('settles every pending send when the stalled receiver closes', async () => {
      const p = await open();
      const [sender, receiver] = slow === 'server' ? [p.client, p.server] : [p.server, p.client];
      const frame = JSON.stringify({ jsonrpc: '2.0', method: 'chunk', params: { pad: 'x'.repeat(FRAME) } });
      const outcomes = Array.from({ length: COUNT }, () =>
        sender.send(frame).then(
          () => 'sent',
          (err: unknown) => (err instanceof TetherError ? err.code : `not a TetherError: ${String(err)}`),
        ),
      );
      await waitFor(() => sender.bufferedBytes > BACKLOG, 10_000, `sender backlog over ${BACKLOG} bytes`);
      receiver.close();
      expect((await closedOf(sender, 'sender', 3_000)).byPeer).toBe(true);
      const settled = await withTimeout(Promise.all(outcomes), 3_000, 'every pending send settles');
      for (const outcome of settled) expect(['sent', 'UNAVAILABLE', 'FAILED_PRECONDITION', 'CANCELLED']).toContain(outcome);
    });
  });
});
