import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../core/logging.js';
import { silentLogger } from '../core/logging.js';
import type { Gateway } from './gateway.js';
import { attachWsListener } from './listen-ws.js';
import { startGrpcListener, type GrpcListener } from './listen-grpc.js';

export interface GatewayServerOptions {
  host?: string;
  port?: number;
  /** gRPC port; undefined or null runs no gRPC listener, 0 picks a free port. */
  grpcPort?: number | null;
  maxFrameBytes?: number;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  logger?: Logger;
}

export interface GatewayServer {
  /** The bound WebSocket/HTTP port (useful with port 0). */
  port: number;
  host: string;
  /** ws://host:port — what agents and clients pass as --gateway. */
  url: string;
  /** The bound gRPC port, when a gRPC listener runs. */
  grpcPort?: number;
  /** grpc://host:port, when a gRPC listener runs. */
  grpcUrl?: string;
  close(): Promise<void>;
}

/**
 * The gateway's HTTP edge: health endpoints and the WebSocket listener, feeding channels to
 * the routing core. Listens on 127.0.0.1:7800 unless told otherwise.
 */
export async function startGatewayServer(gateway: Gateway, opts: GatewayServerOptions = {}): Promise<GatewayServer> {
  const log = opts.logger ?? silentLogger;
  const host = opts.host ?? '127.0.0.1';
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  const detachWs = attachWsListener(server, {
    maxFrameBytes: opts.maxFrameBytes,
    pingIntervalMs: opts.pingIntervalMs,
    pingTimeoutMs: opts.pingTimeoutMs,
    onChannel: (channel) => gateway.accept(channel),
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 7800, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ host, port }, 'gateway listening (WebSocket)');
  let grpc: GrpcListener | undefined;
  if (opts.grpcPort !== undefined && opts.grpcPort !== null) {
    try {
      grpc = await startGrpcListener({ host, port: opts.grpcPort, maxFrameBytes: opts.maxFrameBytes, onChannel: (channel) => gateway.accept(channel) });
    } catch (err) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw err;
    }
    log.info({ host, port: grpc.port }, 'gateway listening (gRPC)');
  }
  const urlHost = host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    port,
    host,
    url: `ws://${urlHost}:${port}`,
    grpcPort: grpc?.port,
    grpcUrl: grpc ? `grpc://${urlHost}:${grpc.port}` : undefined,
    close: () =>
      (closing ??= (async () => {
        await gateway.close();
        await grpc?.close({ graceMs: 1_000 });
        detachWs();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await closed;
      })()),
  };
}
