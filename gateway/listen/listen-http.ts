import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { Door } from '../door/door.js';
import { DEADLINE_CHECK_INTERVAL_MS, type DoorLimits } from '../door/door-limits.js';
import { handleLoginRequest } from './listen-http-login.js';
import { handleNotifyRequest, type NotifyEndpoints } from './listen-http-notify.js';
import { handleOpsRequest, type OpsEndpoints } from './listen-http-ops.js';
import { handleSignInRequest } from './listen-http-sign-in.js';
import { handleTicketRequest } from './listen-http-ticket.js';
import { handleWebRequest, type WebAssets } from './listen-http-web.js';

/** TLS of the gateway's listeners; with `clientCa` every connection must present a certificate it signed. */
export interface ServerTls {
  cert: Buffer;
  key: Buffer;
  clientCa?: Buffer;
}

/** What the plain HTTP requests of the gateway's port reach. */
export interface HttpRoutes {
  ops: OpsEndpoints;
  door: Door;
  /** The web page at `/`: false serves none; undefined, a page that is not built (`/` says how to build it). */
  web: WebAssets | undefined | false;
  /** The gateway's own origin (scheme://host:port), known once it listens: the default OIDC redirect URI's. */
  origin: () => string;
  /** The notification settings and answers (gateway/attention/); undefined: /v1/notify/ answers 404. */
  notify?: NotifyEndpoints;
}

/**
 * The HTTP(S) server under the gateway's port, not yet listening: /healthz, /readyz and
 * /metrics, POST /v1/ticket and /v1/login, the browser sign-in endpoints (listen-http-sign-in.ts), the web page, and 404 JSON for anything else
 * (WebSocket upgrades are attached by their listeners). Headers must arrive within
 * `headersTimeoutMs` and a request within `requestTimeoutMs` (slowloris, half-open TCP).
 */
export function createHttpListener(
  routes: HttpRoutes,
  limits: Pick<DoorLimits, 'headersTimeoutMs' | 'requestTimeoutMs'>,
  tls?: ServerTls,
): Server {
  const onRequest: RequestListener = (req, res) => {
    if (handleOpsRequest(routes.ops, req, res)) return;
    if (handleTicketRequest(routes.door, req, res)) return;
    if (handleLoginRequest(routes.door, req, res)) return;
    if (handleSignInRequest(routes.door, routes.origin, req, res)) return;
    if (handleNotifyRequest(routes.door, routes.notify, req, res)) return;
    if (routes.web !== false && handleWebRequest(routes.web, req, res)) return;
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  };
  const server: Server = tls
    ? createTlsServer(
        {
          connectionsCheckingInterval: DEADLINE_CHECK_INTERVAL_MS,
          cert: tls.cert,
          key: tls.key,
          ca: tls.clientCa,
          requestCert: tls.clientCa !== undefined,
          rejectUnauthorized: tls.clientCa !== undefined,
        },
        onRequest,
      )
    : createServer({ connectionsCheckingInterval: DEADLINE_CHECK_INTERVAL_MS }, onRequest);
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  return server;
}
