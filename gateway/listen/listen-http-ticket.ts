import type { IncomingMessage, ServerResponse } from 'node:http';
import { asTetherError, httpStatusOf } from '../../core/errors.js';
import { TICKET_PATH } from '../../core/protocol/http-paths.js';
import type { Door } from '../door/door.js';
import { cookieOf, SESSION_COOKIE } from './http-cookies.js';
import { errorBody } from './listen-http-login.js';

/**
 * Serves TICKET_PATH on the gateway's HTTP server; returns false for any other path.
 *
 * - `POST` with `Authorization: Bearer <client token>`, or without it from the gateway's page
 *   holding the browser sign-in cookie (Origin required) → 200 `{"ticket", "expires_in"}`
 *   (seconds, ≤ 60): open `ws://HOST:PORT/v1/connect?ticket=…` once within that time, from
 *   the same Origin. Refusals: 401/403/429 with `{"error": {"code", "message", "reason"?}}`.
 * - `OPTIONS` (CORS preflight) → 204 for an allowed Origin, 403 otherwise.
 * - Anything else → 405.
 *
 * CORS headers are sent only to allowed origins, never with credentials (the cookie is
 * SameSite=Strict and only the gateway's own page sends it); no cookie is set. The request
 * body is ignored.
 */
export function handleTicketRequest(door: Door, req: IncomingMessage, res: ServerResponse): boolean {
  const path = (req.url ?? '/').split('?')[0];
  if (path !== TICKET_PATH) return false;
  req.resume(); // the body carries nothing we read
  const origin = req.headers.origin;
  const cors: Record<string, string> =
    origin !== undefined && door.originAllowed(origin) ? { 'access-control-allow-origin': origin, vary: 'Origin' } : {};
  if (req.method === 'OPTIONS') {
    if (!cors['access-control-allow-origin']) {
      res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' }).end('origin not allowed');
      return true;
    }
    res
      .writeHead(204, {
        ...cors,
        'access-control-allow-methods': 'POST',
        'access-control-allow-headers': 'authorization',
        'access-control-max-age': '600',
      })
      .end();
    return true;
  }
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST, OPTIONS', 'content-type': 'text/plain; charset=utf-8' }).end('use POST');
    return true;
  }
  const remote = `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`;
  door
    .issueTicket({
      transport: 'http',
      remote,
      authorization: req.headers.authorization,
      origin,
      path: req.url,
      cookie: cookieOf(req, SESSION_COOKIE),
    })
    .then(
      (ticket) => {
        res.writeHead(200, { ...cors, 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(ticket));
      },
      (err) => {
        res
          .writeHead(httpStatusOf(asTetherError(err).code), { ...cors, 'content-type': 'application/json', 'cache-control': 'no-store' })
          .end(JSON.stringify(errorBody(err)));
      },
    );
  return true;
}
