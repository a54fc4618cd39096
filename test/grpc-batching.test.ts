/**
 * gRPC frame batches (core/wire/grpc-batch.ts): towards a peer that offered to take them,
 * the frames a channel sends in one turn of the event loop leave in as few gRPC messages as
 * the offered size allows (large frames alone), in order, counted in `bufferedBytes` from the
 * start; a close right after sends them first. A peer that offered nothing (an older build)
 * gets, and is sent, one frame per message, exactly as protobufjs reads a plain Frame.
 */
import {
  Client,
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  type ServerDuplexStream,
  type ClientDuplexStream,
  type MethodDefinition,
} from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterEach, describe, expect, it } from 'vitest';
import type { Channel } from '../core/channel/channel.js';
import { frameBytes, type WireFrame } from '../core/wire/frame.js';
import { BATCH_FRAME_MAX_BYTES, BATCH_METADATA_KEY, batchBytesFromOffer, batchOffer } from '../core/wire/grpc-batch.js';
import { findProtoRoot, PROTO_LOADER_OPTIONS } from '../core/channel/proto.js';
import type { GatewayFrame } from '../core/wire/grpc-frame.js';
import { dialGrpc } from '../core/link/dial-grpc.js';
import { startGrpcListener, type GrpcListener } from '../gateway/listen/listen-grpc.js';
import { PAIR_FACTORIES, type ChannelPair } from './support/channel-pairs.js';
import { receiveFrames } from './support/channel-read.js';

const FRAMES = 200;
const textFrames = (n: number, pad = 100) =>
  Array.from({ length: n }, (_, i) => `{"jsonrpc":"2.0","method":"n","params":{"i":${i},"pad":"${'x'.repeat(pad)}"}}`);

/** Counts the gRPC messages a channel hands grpc-js, and their sizes (test-only reach into its private call). */
function countMessages(channel: Channel): { sizes: number[] } {
  const call = (channel as unknown as { call: { write: (...args: unknown[]) => boolean } }).call;
  const counter = { sizes: [] as number[] };
  const original = call.write.bind(call);
  call.write = (message: unknown, ...rest: unknown[]) => {
    counter.sizes.push((message as Buffer).length);
    return original(message, ...rest);
  };
  return counter;
}

/** tether.v1.Gateway/Connect with protobufjs's own codec: a peer built without our batches. */
function referenceConnect(): MethodDefinition<GatewayFrame, GatewayFrame> {
  const pkg = loadSync('tether/v1/gateway.proto', { ...PROTO_LOADER_OPTIONS, includeDirs: [findProtoRoot()] });
  return (pkg['tether.v1.Gateway'] as Record<string, MethodDefinition<GatewayFrame, GatewayFrame>>).Connect;
}

/** Resolves with `n` items pushed by `on`, or rejects after `ms`. */
function collect<T>(n: number, on: (push: (item: T) => void) => void, ms = 5_000): Promise<T[]> {
  return new Promise((resolve, reject) => {
    const got: T[] = [];
    const timer = setTimeout(() => reject(new Error(`only ${got.length} of ${n} within ${ms} ms`)), ms);
    on((item) => {
      got.push(item);
      if (got.length === n) {
        clearTimeout(timer);
        resolve(got);
      }
    });
  });
}

/** 50 frames the channel sends in one turn reach the plain grpc-js `call` as 50 plain Frames, in order. */
async function expectOneFramePerMessage(
  call: ServerDuplexStream<GatewayFrame, GatewayFrame> | ClientDuplexStream<GatewayFrame, GatewayFrame>,
  channel: Channel,
): Promise<void> {
  const frames = textFrames(50);
  const got = collect<GatewayFrame>(frames.length, (push) => call.on('data', push));
  for (const f of frames) channel.post(f);
  const messages = await got;
  expect(messages.map((m) => m.json)).toEqual(frames);
  expect(messages.every((m) => (m.batch ?? []).length === 0)).toBe(true);
}

describe('gRPC frame batches: offers', () => {
  it('offers at most 64 KiB (less with a smaller frame limit) and reads v1 offers, ignoring others', () => {
    expect(batchOffer(33 * 1024 * 1024)).toBe('v1;max=65536');
    expect(batchOffer(1000)).toBe('v1;max=1000');
    expect(batchBytesFromOffer('v1;max=65536')).toBe(65536);
    expect(batchBytesFromOffer('v1;max=9999999')).toBe(65536);
    expect(batchBytesFromOffer('v2;max=1000, v1;max=800')).toBe(800);
    for (const none of [undefined, '', 'v2;max=1000', 'v1', 'v1;max=0', 'v1;max=-5', 'yes'])
      expect(batchBytesFromOffer(none)).toBeUndefined();
  });
});

describe('gRPC frame batches between our channels', () => {
  let pair: ChannelPair | undefined;
  afterEach(() => pair?.cleanup());

  for (const side of ['server', 'client'] as const) {
    it(`frames sent in one turn leave in one message, in order, counted in bufferedBytes at once (${side} side)`, async () => {
      pair = await PAIR_FACTORIES.grpc();
      const from = pair[side];
      const to = side === 'server' ? pair.client : pair.server;
      const messages = countMessages(from);
      const frames = textFrames(FRAMES);
      const before = from.bufferedBytes;
      for (const f of frames) expect(from.post(Buffer.from(f))).toBe(true);
      expect(from.bufferedBytes - before).toBe(frames.reduce((n, f) => n + frameBytes(f), 0));
      expect(messages.sizes).toEqual([]); // held to the end of the turn
      expect(await receiveFrames(to, FRAMES)).toEqual(frames);
      expect(messages.sizes.length).toBe(1);
    });
  }

  it('a frame above the batch threshold goes alone, between batches, order kept; binary frames batch too', async () => {
    pair = await PAIR_FACTORIES.grpc();
    const messages = countMessages(pair.server);
    const big = `"${'y'.repeat(BATCH_FRAME_MAX_BYTES)}"`;
    const binary = { header: '{"method":"session.output"}', body: Buffer.from('{"type":"assistant"}') };
    const frames: WireFrame[] = [...textFrames(10), binary, big, ...textFrames(10)];
    for (const f of frames) expect(pair.server.post(f)).toBe(true);
    const got = await receiveFrames(pair.client, frames.length);
    expect(got.map((f) => (typeof f === 'string' ? f : { header: f.header, body: Buffer.from(f.body).toString() }))).toEqual(
      frames.map((f) => (typeof f === 'string' ? f : { header: f.header, body: Buffer.from(f.body).toString() })),
    );
    expect(messages.sizes.length).toBe(3);
  });

  it('a close right after sending sends the turn’s frames first', async () => {
    pair = await PAIR_FACTORIES.grpc();
    const frames = textFrames(50);
    for (const f of frames) pair.server.post(f);
    pair.server.close('OK', 'done');
    expect(await receiveFrames(pair.client, frames.length + 1)).toEqual(frames);
    expect((await pair.client.closed).code).toBe('OK');
  });

  it('send() promises settle when their batch is written', async () => {
    pair = await PAIR_FACTORIES.grpc();
    const frames = textFrames(20);
    await Promise.all(frames.map((f) => pair!.client.send(f)));
    expect(await receiveFrames(pair.server, frames.length)).toEqual(frames);
  });
});

describe('gRPC frame batches with a peer that offers none, or a small one', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** A plain grpc-js server of tether.v1.Gateway with protobufjs's codec, answering with `headers`. */
  async function referenceServer(
    headers: Metadata,
  ): Promise<{ port: number; calls: Promise<ServerDuplexStream<GatewayFrame, GatewayFrame>> }> {
    const connect = referenceConnect();
    const server = new Server();
    let accepted!: (call: ServerDuplexStream<GatewayFrame, GatewayFrame>) => void;
    const calls = new Promise<ServerDuplexStream<GatewayFrame, GatewayFrame>>((resolve) => (accepted = resolve));
    server.addService(
      { Connect: connect },
      {
        Connect: (call: ServerDuplexStream<GatewayFrame, GatewayFrame>) => {
          call.on('error', () => {});
          call.sendMetadata(headers);
          accepted(call);
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    cleanups.push(() => server.forceShutdown());
    return { port, calls };
  }

  it('a gateway that offers none (an older build) gets one plain Frame per message from our dialer, which still offers', async () => {
    const { port, calls } = await referenceServer(new Metadata());
    const channel = await dialGrpc(new URL(`grpc://127.0.0.1:${port}`), { connectTimeoutMs: 5_000 });
    cleanups.push(() => channel.close());
    const call = await calls;
    expect(call.metadata.get(BATCH_METADATA_KEY)).toEqual([batchOffer(33 * 1024 * 1024)]);
    await expectOneFramePerMessage(call, channel);
  });

  it('a gateway that offers small batches gets batches no larger than its offer', async () => {
    const headers = new Metadata();
    headers.set(BATCH_METADATA_KEY, 'v1;max=600');
    const { port, calls } = await referenceServer(headers);
    const channel = await dialGrpc(new URL(`grpc://127.0.0.1:${port}`), { connectTimeoutMs: 5_000 });
    cleanups.push(() => channel.close());
    const call = await calls;
    const sizes: number[] = [];
    const frames = textFrames(50);
    const messages = countMessages(channel);
    const got = collect<string>(frames.length, (push) =>
      call.on('data', (m: GatewayFrame) => {
        sizes.push(m.batch?.length ?? 0);
        for (const f of m.batch?.length ? m.batch : [m]) push(f.json);
      }),
    );
    for (const f of frames) channel.post(f);
    expect(await got).toEqual(frames);
    expect(Math.max(...messages.sizes)).toBeLessThanOrEqual(600);
    expect(sizes.length).toBeLessThan(frames.length); // batched…
    expect(sizes.length).toBeGreaterThan(5); // …within the offer (each frame is ~140 bytes)
  });

  it('a client that offers none (an older build) gets one plain Frame per message from our listener, which offers', async () => {
    let accepted!: (channel: Channel) => void;
    const serverChannel = new Promise<Channel>((resolve) => (accepted = resolve));
    const listener: GrpcListener = await startGrpcListener({ host: '127.0.0.1', port: 0, onChannel: (channel) => accepted(channel) });
    cleanups.push(() => listener.close({ graceMs: 0 }));
    const connect = referenceConnect();
    const client = new Client(`127.0.0.1:${listener.port}`, credentials.createInsecure());
    cleanups.push(() => client.close());
    const call: ClientDuplexStream<GatewayFrame, GatewayFrame> = client.makeBidiStreamRequest(
      connect.path,
      connect.requestSerialize,
      connect.responseDeserialize,
      new Metadata(),
    );
    call.on('error', () => {});
    cleanups.push(() => call.cancel());
    const headers = new Promise<Metadata>((resolve) => call.once('metadata', resolve));
    const channel = await serverChannel;
    expect((await headers).get(BATCH_METADATA_KEY)).toEqual([batchOffer(33 * 1024 * 1024)]);
    await expectOneFramePerMessage(call, channel);
    // And it may send a batch of its own: each frame arrives as if sent alone.
    const theirs = textFrames(3);
    call.write({ json: '', batch: theirs.map((json) => ({ json })) });
    expect(await receiveFrames(channel, 3)).toEqual(theirs);
  });
});
