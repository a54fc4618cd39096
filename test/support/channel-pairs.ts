import { createServer, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import type { Channel, Transport } from '../../core/channel/channel.js';
import { MemoryChannel } from '../../core/channel/memory.js';
import { dial } from '../../core/link/dial.js';
import { startGrpcListener } from '../../gateway/listen/listen-grpc.js';
import { attachWsListener } from '../../gateway/listen/listen-ws.js';

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
  /**
   * Network loss neither side caused: destroys both legs of the TCP relay the pair was dialed
   * through (needs `viaRelay`); memory destroy().
   */
  cut(): Promise<void>;
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
  /** Dial through a TCP relay on 127.0.0.1:0 so cut() can drop the connection (ws, grpc). */
  viaRelay?: boolean;
}

/** Builds a fresh pair; each call opens its own listener on 127.0.0.1:0. */
export type PairFactory = (opts?: PairOptions) => Promise<ChannelPair>;

function limits(opts: PairOptions): { server?: number; client?: number } {
  return { server: opts.serverMaxFrameBytes ?? opts.maxFrameBytes, client: opts.clientMaxFrameBytes ?? opts.maxFrameBytes };
}

interface Relay {
  port: number;
  /** Destroys every relayed socket, both legs. */
  cut(): void;
  close(): Promise<void>;
}

/** A byte-for-byte TCP relay to 127.0.0.1:targetPort, so tests can cut a live connection. */
async function startRelay(targetPort: number): Promise<Relay> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  };
  const server = createTcpServer((inbound) => {
    const outbound = connect(targetPort, '127.0.0.1');
    track(inbound);
    track(outbound);
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    port: (server.address() as AddressInfo).port,
    cut,
    close: () => {
      cut();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function relayFor(opts: PairOptions, port: number): Promise<{ port: number; relay?: Relay }> {
  if (!opts.viaRelay) return { port };
  const relay = await startRelay(port);
  return { port: relay.port, relay };
}

function noRelay(): never {
  throw new Error('cut() needs a pair opened with viaRelay: true');
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
    cut: async () => server.destroy(),
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
  const via = await relayFor(opts, port);
  const client = await dial(`ws://127.0.0.1:${via.port}`, { maxFrameBytes: max.client, connectTimeoutMs: 5_000 });
  const server = await serverChannel;
  let cleaned: Promise<void> | undefined;
  return {
    server,
    client,
    kill: async () => void socket?.destroy(),
    cut: async () => (via.relay ?? noRelay()).cut(),
    cleanup: () =>
      (cleaned ??= (async () => {
        closeBoth(server, client);
        await via.relay?.close();
        detach();
        http.closeAllConnections();
        await new Promise<void>((resolve) => http.close(() => resolve()));
      })()),
  };
};

/** startGrpcListener on 127.0.0.1:0 and dial('grpc://…') with a bearer token; kill() is forceShutdown. */
const grpcPair: PairFactory = async (opts = {}) => {
  const max = limits(opts);
  let accepted!: (channel: Channel) => void;
  const serverChannel = new Promise<Channel>((resolve) => (accepted = resolve));
  const listener = await startGrpcListener({
    host: '127.0.0.1',
    port: 0,
    maxFrameBytes: max.server,
    onChannel: (channel) => accepted(channel),
  });
  const via = await relayFor(opts, listener.port);
  const client = await dial(`grpc://127.0.0.1:${via.port}`, { maxFrameBytes: max.client, connectTimeoutMs: 5_000, token: 'test-token' });
  const server = await serverChannel;
  return {
    server,
    client,
    kill: () => listener.close({ graceMs: 0 }),
    cut: async () => (via.relay ?? noRelay()).cut(),
    cleanup: async () => {
      closeBoth(server, client);
      await via.relay?.close();
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
