import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AgentConnector } from '@agentclientprotocol/sdk';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { TetherError } from '../core/errors.js';
import type { Logger } from '../core/logging.js';
import { silentLogger } from '../core/logging.js';
import type { TicketOptions } from '../core/auth/tickets.js';
import type { TokenVerifier } from '../core/auth/verify.js';
import { Door, type Admission } from './door.js';
import { AuthFailureLimiter, ConnectionLimiter, DEADLINE_CHECK_INTERVAL_MS, DOOR_DEFAULTS, gateConnection, LISTEN_BACKLOG, type DoorLimits } from './door-limits.js';
import type { Channel } from '../core/channel/channel.js';
import type { Gateway } from './gateway.js';
import type { LoginDesk } from '../core/auth/login-codes.js';
import { handleLoginRequest } from './listen-http-login.js';
import { LiveTokens } from './live-tokens.js';
import type { RevocationList } from './revocations.js';
import { handleTicketRequest } from './listen-http-ticket.js';
import { handleWebRequest, loadWebAssets } from './listen-http-web.js';
import { attachWsListener } from './listen-ws.js';
import { ACP_PATH, attachAcpListener, type AcpLink } from './listen-acp.js';
import { memoryChannelPair } from '../core/channel/memory.js';
import { startGrpcListener, type GrpcListener } from './listen-grpc.js';
import { grpcHealthService } from './grpc-health.js';
import { DIALECT_METADATA_KEY, grpcDialect, JSONRPC_DIALECT, offersJsonRpcDialect, type Dialect } from '../core/protocol/jsonrpc-dialect.js';
import { handleOpsRequest } from './listen-http-ops.js';
import { evaluateReadiness, type ReadinessCheck, type ReadinessReport } from './readiness.js';

/** How the gateway authenticates connections (see gateway/door.ts). */
export interface GatewayAuthOptions {
  /** Verifies bearer tokens; 'off' admits everyone as ANONYMOUS (trusted local use only; logged as a warning). */
  verifier: TokenVerifier | 'off';
  /** Browser origins allowed besides the gateway's own http://HOST:PORT (always allowed). */
  allowOrigins?: string[];
  /** One-time browser tickets (POST /v1/ticket). */
  tickets?: TicketOptions;
  /** Web sign-in codes traded for client tokens (POST /v1/login); absent: the page cannot sign in by link. */
  login?: LoginDesk;
}

export interface GatewayServerOptions {
  host?: string;
  port?: number;
  /** gRPC port; undefined or null runs no gRPC listener, 0 picks a free port. */
  grpcPort?: number | null;
  maxFrameBytes?: number;
  /**
   * TLS on both listeners (wss:// and grpcs://). With `clientCa`, every connection must
   * present a client certificate signed by it (mutual TLS).
   */
  tls?: { cert: Buffer; key: Buffer; clientCa?: Buffer };
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  logger?: Logger;
  /**
   * Authentication at the door. Omitted: authentication is OFF (everyone is ANONYMOUS) and a
   * warning is logged; the CLI always passes it (on unless --auth off).
   */
  auth?: GatewayAuthOptions;
  /** Serve the gateway's Prometheus metrics at GET /metrics (default true). */
  metrics?: boolean;
  /** Checks /readyz (and gRPC health) run besides listening, store and policy. */
  readinessChecks?: ReadinessCheck[];
  /** Folder of the built web page served at `/` (default dist/web); false serves no page. */
  webRoot?: string | false;
  /** Connection caps, failed-authentication rate and HTTP deadlines (defaults: DOOR_DEFAULTS). */
  doorLimits?: Partial<DoorLimits>;
  /** Revoked tokens: refused at the door, and live connections holding one are closed. */
  revocations?: RevocationList;
  /**
   * The ACP agent for a connection admitted at `/acp` (experimental). The composition root
   * builds it; `open` gives it an in-memory channel into routing as the connection's
   * principal (token expiry and revocation tracked as for any channel); `path` carries the
   * upgrade's query. Absent: no `/acp`.
   */
  acp?: (link: AcpLink) => AgentConnector;
}

export interface GatewayServer {
  /** The bound WebSocket/HTTP port (useful with port 0). */
  port: number;
  host: string;
  /** ws://host:port — what agents and clients pass as --gateway. */
  url: string;
  /** http://host:port/ — the web page (https with TLS). */
  pageUrl: string;
  /** The bound gRPC port, when a gRPC listener runs. */
  grpcPort?: number;
  /** grpc://host:port, when a gRPC listener runs. */
  grpcUrl?: string;
  /** Authentication at the door: allowed origins, tickets. */
  door: Door;
  /** What /readyz answers now; gRPC health says SERVING exactly when `ready`. */
  readiness(): ReadinessReport;
  close(): Promise<void>;
}

/**
 * The gateway's HTTP edge: /healthz, /readyz and /metrics (listen-http-ops.ts), the browser
 * ticket endpoint (POST /v1/ticket), web sign-in (POST /v1/login), the web page at `/`
 * (listen-http-web.ts), the WebSocket listener and the gRPC listener (with the
 * standard grpc.health.v1.Health service beside tether.v1.Gateway), feeding channels to the
 * routing core. Ready means: listening (both listeners bound, not closing), store (the
 * session store is open) and policy (the authentication policy is loaded). Every
 * connection passes the door (opts.auth) before the core sees it: a refused WebSocket gets
 * an HTTP 401/403 instead of the upgrade, a refused gRPC stream ends with UNAUTHENTICATED or
 * PERMISSION_DENIED before its headers. Listens on 127.0.0.1:7800 unless told otherwise.
 */
export async function startGatewayServer(gateway: Gateway, opts: GatewayServerOptions = {}): Promise<GatewayServer> {
  const log = opts.logger ?? silentLogger;
  const host = opts.host ?? '127.0.0.1';
  const limits = { ...DOOR_DEFAULTS, ...opts.doorLimits };
  const connections = new ConnectionLimiter(limits);
  const door = new Door({
    ...(opts.auth ?? { verifier: 'off' }),
    logger: log.child({ component: 'door' }),
    onAuthFailure: (reason) => gateway.metrics.authFailure(reason),
    failures: new AuthFailureLimiter(limits),
    revocations: opts.revocations,
  });
  const liveTokens = new LiveTokens({ skewMs: door.clockToleranceMs, now: () => door.nowMs(), revocations: opts.revocations, logger: log.child({ component: 'tokens' }) });
  const gate = (transport: string, plaintextHttp: boolean) => (socket: Socket) =>
    gateConnection(connections, socket, plaintextHttp, (err) => {
      gateway.metrics.connectionRefused(transport);
      log.debug({ transport, remote: socket.remoteAddress, err: err.message }, 'connection refused at the cap');
    });
  /** Hands an admitted channel to routing, with its token tracked (expiry, revocation, renewal). */
  const accept = (channel: Channel, admitted: Admission, transport: string, dialect: Dialect = 'native') => {
    const token = admitted.token;
    if (!token) return gateway.accept(channel, admitted.principal, undefined, dialect);
    liveTokens.track(channel, token);
    gateway.accept(channel, admitted.principal, {
      expiresAt: token.expiresAt,
      renew: async (fresh) => {
        const again = await door.admit({ transport, remote: channel.remote, authorization: `Bearer ${fresh}` });
        if (!again.token) throw new TetherError('FAILED_PRECONDITION', 'authentication is off on this gateway');
        liveTokens.renew(channel, again.token);
        return again.token.expiresAt;
      },
    }, dialect);
  };
  if (!door.authEnabled) log.warn('authentication is OFF: anyone who can reach this gateway can run sessions on its agents');
  const wantGrpc = opts.grpcPort !== undefined && opts.grpcPort !== null;
  let grpc: GrpcListener | undefined;
  let closing: Promise<void> | undefined;
  const checks: ReadinessCheck[] = [
    {
      name: 'listening',
      check: () => (closing ? 'shutting down' : !server.listening ? 'HTTP/WebSocket listener not bound' : wantGrpc && !grpc ? 'gRPC listener not bound' : undefined),
    },
    { name: 'store', check: () => (gateway.store.isOpen ? undefined : `session store (${gateway.store.kind}) is not open`) },
    { name: 'policy', check: () => (door.policyLoaded ? undefined : 'authentication policy not loaded') },
    ...(opts.readinessChecks ?? []),
  ];
  const readiness = () => evaluateReadiness(checks);
  const ops = { readiness, metrics: opts.metrics === false ? undefined : gateway.metrics };
  const web = opts.webRoot === false ? undefined : loadWebAssets(opts.webRoot);
  const onRequest: Parameters<typeof createServer>[1] = (req, res) => {
    if (handleOpsRequest(ops, req, res)) return;
    if (handleTicketRequest(door, req, res)) return;
    if (handleLoginRequest(door, req, res)) return;
    if (opts.webRoot !== false && handleWebRequest(web, req, res)) return;
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  };
  const tls = opts.tls;
  const server: Server = tls
    ? createTlsServer({ connectionsCheckingInterval: DEADLINE_CHECK_INTERVAL_MS, cert: tls.cert, key: tls.key, ca: tls.clientCa, requestCert: tls.clientCa !== undefined, rejectUnauthorized: tls.clientCa !== undefined }, onRequest)
    : createServer({ connectionsCheckingInterval: DEADLINE_CHECK_INTERVAL_MS }, onRequest);
  // Slowloris and half-open TCP: headers within headersTimeoutMs, a request within requestTimeoutMs.
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.on('connection', gate('ws', !tls));
  const admitWs = (req: IncomingMessage) =>
    door.admit({
      transport: 'ws',
      remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`,
      authorization: req.headers.authorization,
      origin: req.headers.origin,
      ticket: ticketOf(req.url),
      path: req.url,
    });
  const detachWs = attachWsListener<Admission>(server, {
    maxFrameBytes: opts.maxFrameBytes,
    pingIntervalMs: opts.pingIntervalMs,
    pingTimeoutMs: opts.pingTimeoutMs,
    admit: admitWs,
    onChannel: (channel, req, admitted) => accept(channel, admitted, 'ws', offersJsonRpcDialect(req.headers['sec-websocket-protocol']) ? 'jsonrpc' : 'native'),
    otherPaths: opts.acp ? [ACP_PATH] : [],
  });
  const acpFor = opts.acp;
  const detachAcp = acpFor
    ? attachAcpListener<Admission>(server, {
        maxFrameBytes: opts.maxFrameBytes,
        admit: admitWs,
        agentFor: (admitted, req) =>
          acpFor({
            path: req.url ?? ACP_PATH,
            open: () => {
              const [ours, theirs] = memoryChannelPair({ maxFrameBytes: opts.maxFrameBytes });
              accept(theirs, admitted, 'acp');
              return ours;
            },
          }),
      })
    : undefined;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 7800, host, LISTEN_BACKLOG, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ host, port }, 'gateway listening (WebSocket)');
  const health = grpcHealthService(() => readiness().ready);
  if (wantGrpc) {
    try {
      grpc = await startGrpcListener<Admission>({
        host,
        port: opts.grpcPort!,
        maxFrameBytes: opts.maxFrameBytes,
        tls: opts.tls,
        admit: (metadata, remote) => door.admit({ transport: 'grpc', remote, authorization: metadata.authorization, origin: metadata.origin }),
        onChannel: (channel, metadata, admitted) => {
          const dialect = grpcDialect(metadata[DIALECT_METADATA_KEY]);
          if (!dialect) return channel.close('INVALID_ARGUMENT', `unknown ${DIALECT_METADATA_KEY} ${JSON.stringify(metadata[DIALECT_METADATA_KEY].slice(0, 64))} (this gateway speaks ${JSONRPC_DIALECT})`);
          accept(channel, admitted, 'grpc', dialect);
        },
        onConnection: gate('grpc', false),
        backlog: LISTEN_BACKLOG,
        services: [health],
      });
    } catch (err) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw err;
    }
    log.info({ host, port: grpc.port }, 'gateway listening (gRPC)');
  }
  const urlHost = host.includes(':') ? `[${host}]` : host;
  door.allowOrigin(`${tls ? 'https' : 'http'}://${urlHost}:${port}`); // same-origin pages of the gateway itself
  const ready = readiness();
  log.info({ ready: ready.ready, checks: ready.checks }, ready.ready ? 'gateway ready' : 'gateway listening but not ready');
  return {
    port,
    host,
    url: `${tls ? 'wss' : 'ws'}://${urlHost}:${port}`,
    pageUrl: `${tls ? 'https' : 'http'}://${urlHost}:${port}/`,
    grpcPort: grpc?.port,
    grpcUrl: grpc ? `${tls ? 'grpcs' : 'grpc'}://${urlHost}:${grpc.port}` : undefined,
    door,
    readiness,
    close: () =>
      (closing ??= (async () => {
        health.shutdown(); // watchers hear NOT_SERVING before the listener goes
        liveTokens.dispose();
        await gateway.close();
        await grpc?.close({ graceMs: 1_000 });
        detachWs();
        await detachAcp?.();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await closed;
      })()),
  };
}

/** The `ticket` query parameter of a request URL, if any. */
function ticketOf(url: string | undefined): string | undefined {
  return new URL(url ?? '/', 'http://gateway').searchParams.get('ticket') ?? undefined;
}
