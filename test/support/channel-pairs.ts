import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Channel, Transport } from '../../core/channel/channel.js';
import { MemoryChannel } from '../../core/channel/memory.js';
import { dial } from '../../core/link/dial.js';
import { startGrpcListener } from '../../gateway/listen-grpc.js';
import { attachWsListener } from '../../gateway/listen-ws.js';

/** A connected pair of channels over one transport, as the conformance suite needs it. */
export interface ChannelPair {
  /** The accepting (gateway) side. */
  server: Channel;
  /** The dialing side. */
  client: Channel;
  /**
   * Cuts the link with no close handshake: memory destroy(), the server's TCP socket
   * destroyed (ws), the gRPC server shut down forcefully (grpc).
   */
  kill(): Promise<void>;
  /** Closes both channels and whatever listens; safe to call more than once. */
  cleanup(): Promise<void>;
}

export interface PairOptions {
  /** Limit for both sides (default CHANNEL_DEFAULTS.maxFrameBytes). */
  maxFrameBytes?: number;
  /** Overrides maxFrameBytes for the accepting side only. */
  serverMaxFrameBytes?: number;
  /** Overrides maxFrameBytes for the dialing side only. */
  clientMaxFrameBytes?: number;
}

/** Builds a fresh pair; each call opens its own listener on 127.0.0.1:0. */
export type PairFactory = (opts?: PairOptions) => Promise<ChannelPair>;

function limits(opts: PairOptions): { server?: number; client?: number } {
  return { server: opts.serverMaxFrameBytes ?? opts.maxFrameBytes, client: opts.clientMaxFrameBytes ?? opts.maxFrameBytes };
}

function closeBoth(server: Channel, client: Channel): void {
  client.close();
  server.close();
}

/** memoryChannelPair, built by hand so the two sides may have different limits. */
const memoryPair: PairFactory = async (opts = {}) => {
  const max = limits(opts);
  const server = new MemoryChannel('memory:server', { maxFrameBytes: max.server });
  const client = new MemoryChannel('memory:client', { maxFrameBytes: max.client });
  server.peer = client;
  client.peer = server;
  return {
    server,
    client,
    kill: async () => server.destroy(),
    cleanup: async () => closeBoth(server, client),
  };
};

/** A node:http server on 127.0.0.1:0 with the WebSocket listener, and dial('ws://…'). */
const wsPair: PairFactory = async (opts = {}) => {
  const max = limits(opts);
  const http: Server = createServer();
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const port = (http.address() as { port: number }).port;
  let socket: Socket | undefined;
  let accepted!: (channel: Channel) => void;
  const serverChannel = new Promise<Channel>((resolve) => (accepted = resolve));
  const detach = attachWsListener(http, {
    maxFrameBytes: max.server,
    onChannel: (channel, req) => {
      socket = req.socket;
      accepted(channel);
    },
  });
  const client = await dial(`ws://127.0.0.1:${port}`, { maxFrameBytes: max.client, connectTimeoutMs: 5_000 });
  const server = await serverChannel;
  let cleaned: Promise<void> | undefined;
  return {
    server,
    client,
    kill: async () => void socket?.destroy(),
    cleanup: () =>
      (cleaned ??= (async () => {
        closeBoth(server, client);
        detach();
        http.closeAllConnections();
        await new Promise<void>((resolve) => http.close(() => resolve()));
      })()),
  };
};

/** startGrpcListener on 127.0.0.1:0 and dial('grpc://…') with a bearer token. */
const grpcPair: PairFactory = async (opts = {}) => {
  const max = limits(opts);
  let accepted!: (channel: Channel) => void;
  const serverChannel = new Promise<Channel>((resolve) => (accepted = resolve));
  const listener = await startGrpcListener({ host: '127.0.0.1', port: 0, maxFrameBytes: max.server, onChannel: (channel) => accepted(channel) });
  const client = await dial(`grpc://127.0.0.1:${listener.port}`, { maxFrameBytes: max.client, connectTimeoutMs: 5_000, token: 'test-token' });
  const server = await serverChannel;
  return {
    server,
    client,
    kill: () => listener.close({ graceMs: 0 }),
    cleanup: async () => {
      closeBoth(server, client);
      await listener.close({ graceMs: 1_000 });
    },
  };
};

/** One factory per transport; the conformance suite is registered once for each key. */
export const PAIR_FACTORIES: Record<Transport, PairFactory> = {
  memory: memoryPair,
  ws: wsPair,
  grpc: grpcPair,
};

/**
 * Test-only introspection: bytes waiting in a channel's inbound queue (BaseChannel's private
 * `queuedBytes`), to show that a reader that stops pulling keeps the receiver bounded.
 */
export function inboundQueuedBytes(channel: Channel): number {
  const value = (channel as unknown as { queuedBytes?: unknown }).queuedBytes;
  if (typeof value !== 'number') throw new Error('channel has no inbound queue to inspect');
  return value;
}
