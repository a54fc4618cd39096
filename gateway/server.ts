import type { IncomingMessage, Server } from 'node:http';
import type { AgentConnector } from '@agentclientprotocol/sdk';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../core/logging.js';
import { silentLogger } from '../core/logging.js';
import type { TicketOptions } from '../core/auth/tickets.js';
import type { TokenVerifier } from '../core/auth/verify.js';
import type { Door, Admission } from './door/door.js';
import { DOOR_DEFAULTS, LISTEN_BACKLOG, type DoorLimits } from './door/door-limits.js';
import type { Gateway } from './gateway.js';
import type { LoginDesk } from '../core/auth/login-codes.js';
import type { BrowserSessions } from './door/browser-sessions.js';
import type { WebSignInOptions } from './door/web-sign-in.js';
import type { RevocationList } from './door/revocations.js';
import { loadWebAssets } from './listen/listen-http-web.js';
import { attachWsListener } from './listen/listen-ws.js';
import { ACP_PATH, attachAcpListener, type AcpLink } from './listen/listen-acp.js';
import { memoryChannelPair } from '../core/channel/memory.js';
import { startGrpcListener, type GrpcListener } from './listen/listen-grpc.js';
import { grpcHealthService, type GrpcHealthService } from './listen/grpc-health.js';
import { DIALECT_METADATA_KEY, grpcDialect, JSONRPC_DIALECT, offersJsonRpcDialect } from '../core/protocol/jsonrpc-dialect.js';
import { evaluateReadiness, type ReadinessCheck, type ReadinessReport } from './readiness.js';
import { openAdmissions, type Admissions } from './admission.js';
import { createHttpListener, type ServerTls } from './listen/listen-http.js';
import type { NotifyEndpoints } from './listen/listen-http-notify.js';
import { DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT } from './config.js';

/** How the gateway authenticates connections (see gateway/door/door.ts). */
export interface GatewayAuthOptions {
  /** Verifies bearer tokens; 'off' admits everyone as ANONYMOUS (trusted local use only; logged as a warning). */
  verifier: TokenVerifier | 'off';
  /** Browser origins allowed besides the gateway's own http://HOST:PORT (always allowed). */
  allowOrigins?: string[];
  /** One-time browser tickets (POST /v1/ticket). */
  tickets?: TicketOptions;
  /** Web sign-in codes traded for client tokens (POST /v1/login); absent: the page cannot sign in by link. */
  login?: LoginDesk;
  /** Browser sign-ins: one cookie per browser that buys tickets for every tab; absent: each tab keeps its own token. */
  browser?: BrowserSessions;
  /** Sign-in with an identity provider and `tether login`. */
  web?: Omit<WebSignInOptions, 'browser' | 'guard' | 'login'>;
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
  tls?: ServerTls;
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
  acp?: (link: AcpLink) => AgentConnector | Promise<AgentConnector>;
  /** The notification settings and answers at /v1/notify/ (the attention room's desk); absent: none. */
  notify?: NotifyEndpoints;
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
  const host = opts.host ?? DEFAULT_GATEWAY_HOST;
  const limits = { ...DOOR_DEFAULTS, ...opts.doorLimits };
  const admissions = openAdmissions(gateway, { auth: opts.auth, limits, revocations: opts.revocations, logger: log });
  const wantGrpc = opts.grpcPort !== undefined && opts.grpcPort !== null;
  const state: { grpc?: GrpcListener; closing?: Promise<void>; origin?: string } = {};
  const readiness = readinessOf(gateway, admissions.door, opts.readinessChecks ?? [], () =>
    state.closing
      ? 'shutting down'
      : !http.listening
        ? 'HTTP/WebSocket listener not bound'
        : wantGrpc && !state.grpc
          ? 'gRPC listener not bound'
          : undefined,
  );
  const http = createHttpListener(
    {
      ops: { readiness, metrics: opts.metrics === false ? undefined : gateway.metrics },
      door: admissions.door,
      web: opts.webRoot === false ? false : loadWebAssets(opts.webRoot),
      origin: () => state.origin ?? '',
      notify: opts.notify,
    },
    limits,
    opts.tls,
  );
  http.on('connection', admissions.gate('ws', !opts.tls));
  const detachUpgrades = attachUpgrades(http, admissions, opts);
  const port = await listen(http, opts.port ?? DEFAULT_GATEWAY_PORT, host);
  log.info({ host, port }, 'gateway listening (WebSocket)');
  const health = grpcHealthService(() => readiness().ready);
  if (wantGrpc) {
    state.grpc = await startGrpcEdge(admissions, { ...opts, host, grpcPort: opts.grpcPort! }, health).catch(async (err) => {
      await closeHttp(http);
      throw err;
    });
    log.info({ host, port: state.grpc.port }, 'gateway listening (gRPC)');
  }
  const urls = gatewayUrls(host, port, state.grpc?.port, opts.tls !== undefined);
  admissions.door.allowOrigin(urls.origin); // same-origin pages of the gateway itself
  state.origin = urls.origin;
  const ready = readiness();
  log.info({ ready: ready.ready, checks: ready.checks }, ready.ready ? 'gateway ready' : 'gateway listening but not ready');
  return {
    port,
    host,
    url: urls.url,
    pageUrl: urls.pageUrl,
    grpcPort: state.grpc?.port,
    grpcUrl: urls.grpcUrl,
    door: admissions.door,
    readiness,
    close: () => (state.closing ??= closeInOrder(gateway, { health, admissions, grpc: state.grpc, detachUpgrades, http })),
  };
}

/**
 * Stops a gateway server: health watchers hear NOT_SERVING before the listeners go, tokens
 * stop being tracked, routing closes (sessions saved), then gRPC (open streams get a grace),
 * the WebSocket and ACP upgrades, and the HTTP server with every connection it holds.
 */
async function closeInOrder(
  gateway: Gateway,
  parts: { health: GrpcHealthService; admissions: Admissions; grpc?: GrpcListener; detachUpgrades: () => Promise<void>; http: Server },
): Promise<void> {
  parts.health.shutdown();
  parts.admissions.dispose();
  await gateway.close();
  await parts.grpc?.close({ graceMs: GRPC_CLOSE_GRACE_MS });
  await parts.detachUpgrades();
  await closeHttp(parts.http);
}

/** How long open gRPC streams get to end on close before they are cancelled. */
const GRPC_CLOSE_GRACE_MS = 1_000;

/** Ready means: listening (`listening` says what is not), the session store open, the authentication policy loaded, and the caller's own checks. */
function readinessOf(gateway: Gateway, door: Door, extra: ReadinessCheck[], listening: () => string | undefined): () => ReadinessReport {
  const checks: ReadinessCheck[] = [
    { name: 'listening', check: listening },
    { name: 'store', check: () => (gateway.store.isOpen ? undefined : `session store (${gateway.store.kind}) is not open`) },
    { name: 'policy', check: () => (door.policyLoaded ? undefined : 'authentication policy not loaded') },
    ...extra,
  ];
  return () => evaluateReadiness(checks);
}

/**
 * The WebSocket upgrades of the HTTP server, each through the door: the Tether wire at
 * /v1/connect (the JSON-RPC dialect by subprotocol) and, when `opts.acp` is given, ACP at
 * /acp. Returns what detaches both, closing their sockets.
 */
function attachUpgrades(http: Server, admissions: Admissions, opts: GatewayServerOptions): () => Promise<void> {
  const admit = (req: IncomingMessage) =>
    admissions.door.admit({
      transport: 'ws',
      remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`,
      authorization: req.headers.authorization,
      origin: req.headers.origin,
      ticket: ticketOf(req.url),
      path: req.url,
    });
  const detachWs = attachWsListener<Admission>(http, {
    maxFrameBytes: opts.maxFrameBytes,
    pingIntervalMs: opts.pingIntervalMs,
    pingTimeoutMs: opts.pingTimeoutMs,
    admit,
    onChannel: (channel, req, admitted) =>
      admissions.accept(channel, admitted, 'ws', offersJsonRpcDialect(req.headers['sec-websocket-protocol']) ? 'jsonrpc' : 'native'),
    otherPaths: opts.acp ? [ACP_PATH] : [],
  });
  const acpFor = opts.acp;
  const detachAcp = acpFor
    ? attachAcpListener<Admission>(http, {
        maxFrameBytes: opts.maxFrameBytes,
        admit,
        onConnection: (admitted, connection) => admissions.watch(connection, admitted),
        agentFor: (admitted, req) =>
          acpFor({
            path: req.url ?? ACP_PATH,
            open: () => {
              const [ours, theirs] = memoryChannelPair({ maxFrameBytes: opts.maxFrameBytes });
              admissions.accept(theirs, admitted, 'acp');
              return ours;
            },
          }),
      })
    : undefined;
  return async () => {
    detachWs();
    await detachAcp?.();
  };
}

/** The gRPC listener beside the HTTP port, with grpc.health.v1.Health; streams pass the door, their dialect named by metadata. */
function startGrpcEdge(
  admissions: Admissions,
  opts: GatewayServerOptions & { host: string; grpcPort: number },
  health: GrpcHealthService,
): Promise<GrpcListener> {
  return startGrpcListener<Admission>({
    host: opts.host,
    port: opts.grpcPort,
    maxFrameBytes: opts.maxFrameBytes,
    tls: opts.tls,
    admit: (metadata, remote) =>
      admissions.door.admit({ transport: 'grpc', remote, authorization: metadata.authorization, origin: metadata.origin }),
    onChannel: (channel, metadata, admitted) => {
      const dialect = grpcDialect(metadata[DIALECT_METADATA_KEY]);
      if (!dialect)
        return channel.close(
          'INVALID_ARGUMENT',
          `unknown ${DIALECT_METADATA_KEY} ${JSON.stringify(metadata[DIALECT_METADATA_KEY].slice(0, 64))} (this gateway speaks ${JSONRPC_DIALECT})`,
        );
      admissions.accept(channel, admitted, 'grpc', dialect);
    },
    onConnection: admissions.gate('grpc', false),
    backlog: LISTEN_BACKLOG,
    services: [health],
  });
}

/** Binds the HTTP server; resolves with the bound port. */
function listen(http: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.once('error', reject);
    http.listen(port, host, LISTEN_BACKLOG, () => {
      http.off('error', reject);
      resolve((http.address() as AddressInfo).port);
    });
  });
}

/** Closes the HTTP server and every connection it still holds. */
function closeHttp(http: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => http.close(() => resolve()));
  http.closeAllConnections();
  return closed;
}

/** What the gateway prints and allows: its URLs per listener, and the origin of its own page. */
function gatewayUrls(
  host: string,
  port: number,
  grpcPort: number | undefined,
  tls: boolean,
): { url: string; pageUrl: string; grpcUrl?: string; origin: string } {
  const urlHost = host.includes(':') ? `[${host}]` : host;
  const origin = `${tls ? 'https' : 'http'}://${urlHost}:${port}`;
  return {
    url: `${tls ? 'wss' : 'ws'}://${urlHost}:${port}`,
    pageUrl: `${origin}/`,
    grpcUrl: grpcPort === undefined ? undefined : `${tls ? 'grpcs' : 'grpc'}://${urlHost}:${grpcPort}`,
    origin,
  };
}

/** The `ticket` query parameter of a request URL, if any. */
function ticketOf(url: string | undefined): string | undefined {
  return new URL(url ?? '/', 'http://gateway').searchParams.get('ticket') ?? undefined;
}
