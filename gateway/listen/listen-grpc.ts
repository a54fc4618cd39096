import {
  Metadata,
  Server,
  ServerCredentials,
  type ServerDuplexStream,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import type { Channel } from '../../core/channel/channel.js';
import { CHANNEL_DEFAULTS } from '../../core/channel/channel.js';
import { GRPC_DEFAULTS, GrpcServerChannel, grpcLinkOptions } from '../../core/channel/grpc.js';
import { BATCH_METADATA_KEY, batchBytesFromOffer, batchOffer } from '../../core/wire/grpc-batch.js';
import { loadGatewayService } from '../../core/channel/proto.js';
import { FrameEncoder, type GatewayFrame } from '../../core/wire/grpc-frame.js';
import { EndOfTurn } from '../../core/channel/end-of-turn.js';
import { asTetherError, TetherError } from '../../core/errors.js';
import { createServer as createTcpServer, type Socket } from 'node:net';
import type { Http2Server, ServerHttp2Session } from 'node:http2';

/** Server TLS material for {@link startGrpcListener}. */
export interface GrpcListenerTls {
  /** PEM certificate chain of the gateway. */
  cert: Buffer;
  /** PEM private key of the gateway. */
  key: Buffer;
  /** PEM CA bundle; when set, callers must present a client certificate it signed (mTLS). */
  clientCa?: Buffer;
}

/** Options of {@link startGrpcListener}; limits and keepalive default to the shared gRPC defaults. */
export interface GrpcListenerOptions<A = undefined> {
  /** Interface to bind, e.g. '127.0.0.1', '0.0.0.0' or '::'. */
  host: string;
  /** Port to bind; 0 picks a free one (read it back from the result). */
  port: number;
  /** Largest frame in bytes either way (default CHANNEL_DEFAULTS.maxFrameBytes). */
  maxFrameBytes?: number;
  /** Keepalive ping interval (default 15 s). */
  keepaliveTimeMs?: number;
  /** Keepalive ping answer timeout (default 10 s). */
  keepaliveTimeoutMs?: number;
  /** Server TLS; plaintext when absent. */
  tls?: GrpcListenerTls;
  /**
   * Decides each stream before it is accepted (authentication at the door), from the call's
   * metadata (lower-case keys, first value of each; `-bin` values base64) and the peer
   * address. Resolve with what onChannel should get; reject (a TetherError) to refuse: the
   * stream ends with that code and message before any response headers, so the caller's
   * dial fails with it, and onChannel is never called. Absent: every stream is accepted.
   */
  admit?: (metadata: Record<string, string>, remote: string) => Promise<A>;
  /**
   * Called with every new, open channel, the call's metadata and what admit resolved with.
   * The callee owns the channel from then on. Closing it synchronously (e.g.
   * `close('UNAUTHENTICATED', …)`) refuses the stream before its response headers, so the
   * caller's dial fails with that code.
   */
  onChannel: (channel: Channel, metadata: Record<string, string>, admitted: A) => void;
  /**
   * Decides each TCP connection as it is accepted, before any byte is read (connection caps):
   * return false having ended the socket to refuse it. Absent: every connection is taken.
   */
  onConnection?: (socket: Socket) => boolean;
  /** Listen backlog: connections the kernel completes before we accept them (default Node's 511). */
  backlog?: number;
  /** More services on the same port (the health service), served without the door: they carry no session data. */
  services?: { definition: ServiceDefinition; implementation: UntypedServiceImplementation }[];
}

/** Options of {@link GrpcListener.close}. */
export interface GrpcListenerCloseOptions {
  /**
   * How long open streams get to finish after being closed with UNAVAILABLE ("gateway
   * listener closing") before every connection is cut (default 5 s). 0 cuts at once, with no
   * status: peers see the connection drop.
   */
  graceMs?: number;
}

/** A bound gRPC listener, as resolved by {@link startGrpcListener}. */
export interface GrpcListener {
  /** The bound port (the real one when 0 was asked for). */
  readonly port: number;
  /**
   * Stops accepting, closes every channel this listener handed out that is still open, waits
   * up to graceMs for the streams to finish and then forces the rest. Idempotent: later calls
   * return the same promise, which resolves once the server is down.
   */
  close(opts?: GrpcListenerCloseOptions): Promise<void>;
}

/** Default grace for close(). */
const CLOSE_GRACE_MS = 5_000;

function metadataRecord(metadata: Metadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata.getMap())) {
    out[key] = typeof value === 'string' ? value : Buffer.from(value).toString('base64');
  }
  return out;
}

/**
 * Gives every HTTP/2 session of `server` a receive window of `bytes` (per stream and for the
 * connection), as grpc-js's `grpc-node.flow_control_window` does for the connections it dials:
 * its server has no such option and keeps Node's 64 KiB, which made each large frame from an
 * agent or client wait for a WINDOW_UPDATE (GRPC_DEFAULTS.flowControlWindowBytes). grpc-js keeps
 * the http2 servers its injectors made in `http2Servers`, which it does not publish; should a
 * release rename it, this returns false and the link runs with Node's window
 * (test/grpc-flow-window.test.ts fails on it, so an upgrade does not lose it unseen).
 */
export function widenReceiveWindows(server: Server, bytes: number): boolean {
  const http2Servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(http2Servers instanceof Map)) return false;
  let widened = false;
  for (const http2Server of http2Servers.keys() as Iterable<Http2Server>) {
    http2Server.on('session', widen);
    widened = true;
  }
  return widened;

  function widen(session: ServerHttp2Session): void {
    try {
      session.settings({ initialWindowSize: bytes });
      session.setLocalWindowSize(bytes);
    } catch {
      // A session destroyed as it opened: nothing to widen.
    }
  }
}

/**
 * Serves tether.v1.Gateway/Connect and hands out one channel per stream. Message limits,
 * session memory and keepalive are set explicitly (see grpcLinkOptions) and agree with the
 * dialer's. Resolves once bound; rejects with UNAVAILABLE if the address cannot be bound.
 */
export function startGrpcListener<A = undefined>(opts: GrpcListenerOptions<A>): Promise<GrpcListener> {
  const maxFrameBytes = opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes;
  const server = new Server({
    ...grpcLinkOptions({ maxFrameBytes, keepaliveTimeMs: opts.keepaliveTimeMs, keepaliveTimeoutMs: opts.keepaliveTimeoutMs }),
    'grpc.http2.min_ping_interval_without_data_ms': GRPC_DEFAULTS.minPingIntervalWithoutDataMs,
  });
  const open = new Set<Channel>();
  const service = loadGatewayService();
  // Shared by this listener's channels: one tick flushes all their batches, a frame posted to every client is encoded once.
  const endOfTurn = new EndOfTurn();
  const encoder = new FrameEncoder();
  const acceptedHeaders = new Metadata();
  acceptedHeaders.set(BATCH_METADATA_KEY, batchOffer(maxFrameBytes));

  server.addService(service.definition, {
    Connect: (call: ServerDuplexStream<GatewayFrame, GatewayFrame>) => {
      const metadata = metadataRecord(call.metadata);
      // Batches towards a caller that offered to take them (core/wire/grpc-batch.ts).
      const channel = new GrpcServerChannel(call, {
        maxFrameBytes,
        batchBytes: batchBytesFromOffer(metadata[BATCH_METADATA_KEY]),
        endOfTurn,
        encoder,
      });
      open.add(channel);
      void channel.closed.then(() => open.delete(channel));
      const accept = (admitted: A) => {
        if (channel.isClosed) return; // cancelled while we decided
        try {
          opts.onChannel(channel, metadata, admitted);
        } catch {
          channel.close('INTERNAL', 'gateway failed to accept the stream');
        }
        // Response headers tell the dialer its stream was accepted, and that we take batches.
        if (!channel.isClosed) call.sendMetadata(acceptedHeaders);
      };
      const admit = opts.admit;
      if (!admit) return accept(undefined as A);
      Promise.resolve()
        .then(() => admit(metadata, call.getPeer()))
        .then(accept, (err) => {
          const e = asTetherError(err);
          channel.close(e.code, e.message);
        });
    },
  });

  for (const extra of opts.services ?? []) server.addService(extra.definition, extra.implementation);

  const creds = opts.tls
    ? ServerCredentials.createSsl(
        opts.tls.clientCa ?? null,
        [{ cert_chain: opts.tls.cert, private_key: opts.tls.key }],
        opts.tls.clientCa !== undefined,
      )
    : ServerCredentials.createInsecure();
  // Our own TCP listener feeds grpc-js through a connection injector: grpc-js has no hook on
  // accepted connections, and the caps must apply before TLS or HTTP/2 cost anything.
  const injector = server.createConnectionInjector(creds);
  widenReceiveWindows(server, GRPC_DEFAULTS.flowControlWindowBytes);
  const tcp = createTcpServer((socket) => {
    if (opts.onConnection && !opts.onConnection(socket)) return;
    injector.injectConnection(socket);
  });
  const where = `${opts.host.includes(':') && !opts.host.startsWith('[') ? `[${opts.host}]` : opts.host}:${opts.port}`;

  return new Promise((resolve, reject) => {
    tcp.once('error', (err) => {
      server.forceShutdown();
      reject(new TetherError('UNAVAILABLE', `cannot bind gRPC listener on ${where}: ${err.message}`));
    });
    tcp.listen(opts.port, opts.host.replace(/^\[(.*)\]$/, '$1'), opts.backlog, () => {
      tcp.removeAllListeners('error');
      tcp.on('error', () => {});
      const port = (tcp.address() as { port: number }).port;
      let closing: Promise<void> | undefined;
      resolve({
        port,
        close({ graceMs = CLOSE_GRACE_MS }: GrpcListenerCloseOptions = {}) {
          closing ??= new Promise<void>((done) => {
            tcp.close();
            const finish = () => {
              injector.destroy();
              done();
            };
            if (graceMs <= 0) {
              server.forceShutdown();
              finish();
              return;
            }
            const timer = setTimeout(() => {
              server.forceShutdown();
              finish();
            }, graceMs);
            server.tryShutdown(() => {
              clearTimeout(timer);
              finish();
            });
            for (const channel of open) channel.close('UNAVAILABLE', 'gateway listener closing');
          });
          return closing;
        },
      });
    });
  });
}
