import type { IncomingMessage, ServerResponse } from 'node:http';
import { asTetherError, httpStatusOf, TetherError } from '../../core/errors.js';
import { LOGIN_PATH } from '../../core/protocol/http-paths.js';
import type { Door } from '../door/door.js';
import { keepsSecureCookies, SESSION_COOKIE, setCookie } from './http-cookies.js';

/** Largest request body read (a code is a few hundred bytes). */
const MAX_LOGIN_BODY_BYTES = 8 * 1024;

/**
 * Serves LOGIN_PATH; returns false for any other path.
 *
 * - `GET` → 200 `{"auth": "on"|"off", "oidc"?: {"name"}}`: whether the page must sign in at
 *   all, and the identity provider it may offer.
 * - `POST` with body `{"code": "<sign-in code>"}` → 200 `{"token", "expires_in", "principal",
 *   "browser_session"}`: a client token for the code's subject and scopes, once per code, and,
 *   where the browser keeps Secure cookies (https, or a loopback address), the sign-in cookie
 *   every tab of this browser buys tickets with (`browser_session: true`: the page need not
 *   keep the token). Refusals:
 *   400/401/403/429 with `{"error": {"code", "message", "reason"?}}` (a second use of a code is 401).
 * - Anything else → 405.
 *
 * Same-origin only in practice: an Origin not on the allow list is refused (403), and no CORS
 * header is ever sent, so another site's page cannot read the answer. Never cached.
 */
export function handleLoginRequest(door: Door, req: IncomingMessage, res: ServerResponse): boolean {
  const path = (req.url ?? '/').split('?')[0];
  if (path !== LOGIN_PATH) return false;
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers }).end(JSON.stringify(body));
  const fail = (err: unknown) => json(httpStatusOf(asTetherError(err).code), errorBody(err));
  if (req.method === 'GET') {
    req.resume();
    json(200, { auth: door.authEnabled ? 'on' : 'off', ...door.web.offer });
    return true;
  }
  if (req.method !== 'POST') {
    req.resume();
    res.writeHead(405, { allow: 'GET, POST', 'content-type': 'text/plain; charset=utf-8' }).end('use POST');
    return true;
  }
  const remote = `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`;
  readBody(req, MAX_LOGIN_BODY_BYTES)
    .then((body) =>
      door.signIn({ transport: 'http', remote, origin: req.headers.origin, path: LOGIN_PATH }, codeOf(body), keepsSecureCookies(req)),
    )
    .then(
      (r) =>
        json(
          200,
          { ...r.body, browser_session: r.cookie !== undefined },
          r.cookie && door.browser ? { 'set-cookie': setCookie(SESSION_COOKIE, r.cookie, door.browser.maxAgeSeconds) } : {},
        ),
      fail,
    );
  return true;
}

/** The JSON body of a refusal: its code, its message for the person, and the auth reason when there is one. */
export function errorBody(err: unknown): { error: { code: string; message: string; reason?: string } } {
  const e = asTetherError(err);
  const reason = typeof e.details?.reason === 'string' ? e.details.reason : undefined;
  return { error: { code: e.code, message: e.message, ...(reason ? { reason } : {}) } };
}

/** The `code` of a JSON body; INVALID_ARGUMENT for anything else. */
function codeOf(body: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new TetherError('INVALID_ARGUMENT', 'the body must be JSON: {"code": "…"}');
  }
  const code = (parsed as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code)
    throw new TetherError('INVALID_ARGUMENT', 'the body must carry "code", the sign-in code from the link');
  return code;
}

/** Reads a request body up to `max` bytes; INVALID_ARGUMENT beyond. */
export function readBody(req: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        req.destroy();
        reject(new TetherError('INVALID_ARGUMENT', `request body over ${max} bytes`));
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', (err) => reject(new TetherError('INVALID_ARGUMENT', `request body not read: ${err.message}`)));
  });
}
