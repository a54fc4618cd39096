import type { IncomingMessage, ServerResponse } from 'node:http';
import { asTetherError, httpStatusOf, TetherError } from '../../core/errors.js';
import {
  CLI_LOGIN_PATH,
  CLI_TOKEN_PATH,
  DEVICE_APPROVE_PATH,
  DEVICE_PATH,
  LOGOUT_PATH,
  OIDC_CALLBACK_PATH,
  OIDC_START_PATH,
} from '../../core/protocol/http-paths.js';
import type { Door, DoorRequest } from '../door/door.js';
import { cookieOf, keepsSecureCookies, SESSION_COOKIE, setCookie, STATE_COOKIE } from './http-cookies.js';
import { errorBody, readBody } from './listen-http-login.js';

/** Largest JSON body read by these endpoints. */
const MAX_BODY_BYTES = 4 * 1024;
/** How long the sign-in-in-progress cookie lives (the identity provider must answer within it). */
const STATE_COOKIE_SEC = 600;
/** A state `tether login` chose: random, URL-safe. */
const CLI_STATE = /^[\w-]{16,128}$/;

/**
 * The browser's sign-in endpoints beside /v1/login and /v1/ticket; returns false for any
 * other path. `origin()` is the gateway's own origin (the default redirect URI's).
 *
 * - `GET /v1/oidc/start[?return=#…]` → 302 to the identity provider, with the state cookie.
 * - `GET /v1/oidc/callback` → 302 to the page (`/` plus the return hash) with the sign-in
 *   cookie; a refused sign-in gets a small page that says why in plain words.
 * - `POST /v1/logout` → 204, the sign-in ended in every tab and the cookie deleted.
 * - `POST /v1/cli-login` `{"challenge", "port", "state"}` (the page, signed in) → 200
 *   `{"redirect", "principal"}`: the `tether login` listener's URL on 127.0.0.1 with a one-time code.
 * - `POST /v1/cli-token` `{"code", "code_verifier"}` (`tether login`) → 200 `{"token", "expires_in", "principal"}`;
 *   `{"device_code"}` (`tether login --device`) → 200 `{"pending": true}` until approved, then the same.
 * - `POST /v1/device` (`tether login --device`) → 200 `{"device_code", "user_code", "expires_in", "interval"}`.
 * - `POST /v1/device/approve` `{"user_code"}` (the page, signed in) → 200 `{"principal"}`.
 */
export function handleSignInRequest(door: Door, origin: () => string, req: IncomingMessage, res: ServerResponse): boolean {
  const url = new URL(req.url ?? '/', 'http://gateway');
  const path = url.pathname;
  if (![OIDC_START_PATH, OIDC_CALLBACK_PATH, LOGOUT_PATH, CLI_LOGIN_PATH, CLI_TOKEN_PATH, DEVICE_PATH, DEVICE_APPROVE_PATH].includes(path))
    return false;
  const get = path === OIDC_START_PATH || path === OIDC_CALLBACK_PATH;
  if (req.method !== (get ? 'GET' : 'POST')) {
    req.resume();
    res.writeHead(405, { allow: get ? 'GET' : 'POST', 'content-type': 'text/plain; charset=utf-8' }).end(get ? 'use GET' : 'use POST');
    return true;
  }
  const doorReq: DoorRequest = {
    transport: 'http',
    remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`,
    origin: req.headers.origin,
    path,
    cookie: cookieOf(req, SESSION_COOKIE),
  };
  const redirectUri = door.web.redirectUri ?? `${origin()}${OIDC_CALLBACK_PATH}`;
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers }).end(JSON.stringify(body));
  const failJson = (err: unknown) => json(httpStatusOf(asTetherError(err).code), errorBody(err));
  const clearState = setCookie(STATE_COOKIE, '', 0, 'Lax');
  const failPage = (err: unknown) => refusalPage(res, err, clearState);
  if (![CLI_LOGIN_PATH, CLI_TOKEN_PATH, DEVICE_APPROVE_PATH].includes(path)) req.resume(); // no body read
  switch (path) {
    case OIDC_START_PATH:
      if (!keepsSecureCookies(req)) {
        failPage(
          new TetherError(
            'FAILED_PRECONDITION',
            'sign-in with the identity provider needs the gateway on https (or this machine’s 127.0.0.1): a browser keeps no sign-in cookie from plain http elsewhere. Use a sign-in link, or serve the gateway with --tls-cert.',
          ),
        );
        break;
      }
      door.web.startOidc(doorReq, redirectUri, url.searchParams.get('return') ?? '').then(
        ({ url: to, state }) =>
          res
            .writeHead(302, {
              location: to,
              'cache-control': 'no-store',
              'set-cookie': setCookie(STATE_COOKIE, state, STATE_COOKIE_SEC, 'Lax'),
            })
            .end(),
        failPage,
      );
      break;
    case OIDC_CALLBACK_PATH:
      door.web.finishOidc(doorReq, new URL(url.pathname + url.search, redirectUri), cookieOf(req, STATE_COOKIE)).then(
        ({ cookie, returnTo }) =>
          res
            .writeHead(302, {
              location: `/${returnTo}`,
              'cache-control': 'no-store',
              'set-cookie': [setCookie(SESSION_COOKIE, cookie, door.browser!.maxAgeSeconds), clearState],
            })
            .end(),
        failPage,
      );
      break;
    case LOGOUT_PATH:
      door.web
        .signOut(doorReq)
        .then(() => res.writeHead(204, { 'cache-control': 'no-store', 'set-cookie': setCookie(SESSION_COOKIE, '', 0) }).end(), failJson);
      break;
    case CLI_LOGIN_PATH:
      readBody(req, MAX_BODY_BYTES)
        .then(async (text) => {
          const b = jsonBody(text);
          const port = b.port;
          if (typeof port !== 'number' || !Number.isInteger(port) || port < 1024 || port > 65535)
            throw new TetherError('INVALID_ARGUMENT', '"port" must be the tether login listener’s port (1024-65535)');
          if (typeof b.state !== 'string' || !CLI_STATE.test(b.state))
            throw new TetherError('INVALID_ARGUMENT', '"state" must be 16-128 URL-safe characters');
          const { code, sub } = await door.web.cliCode(doorReq, String(b.challenge ?? ''));
          // Only ever to this machine's loopback: the gateway never sends a code anywhere else.
          const to = new URL(`http://127.0.0.1:${port}/callback`);
          to.searchParams.set('code', code);
          to.searchParams.set('state', b.state);
          json(200, { redirect: to.href, principal: sub });
        })
        .catch(failJson);
      break;
    case CLI_TOKEN_PATH:
      readBody(req, MAX_BODY_BYTES)
        .then((text) => {
          const b = jsonBody(text);
          if (typeof b.device_code === 'string') return door.web.devicePoll(doorReq, b.device_code);
          if (typeof b.code !== 'string' || typeof b.code_verifier !== 'string')
            throw new TetherError('INVALID_ARGUMENT', 'the body must be {"code": "…", "code_verifier": "…"} or {"device_code": "…"}');
          return door.web.cliToken(doorReq, b.code, b.code_verifier);
        })
        .then((r) => json(200, r), failJson);
      break;
    case DEVICE_PATH:
      door.web.deviceStart(doorReq).then((r) => json(200, r), failJson);
      break;
    case DEVICE_APPROVE_PATH:
      readBody(req, MAX_BODY_BYTES)
        .then((text) => {
          const b = jsonBody(text);
          if (typeof b.user_code !== 'string' || b.user_code.length > 32)
            throw new TetherError('INVALID_ARGUMENT', 'the body must be {"user_code": "XXXX-XXXX"}');
          return door.web.deviceApprove(doorReq, b.user_code);
        })
        .then((r) => json(200, r), failJson);
      break;
  }
  return true;
}

/** A JSON object body; INVALID_ARGUMENT for anything else. */
function jsonBody(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // falls through to the refusal
  }
  throw new TetherError('INVALID_ARGUMENT', 'the body must be a JSON object');
}

/** A refused browser sign-in as a small page saying why, and the way back. */
function refusalPage(res: ServerResponse, err: unknown, clearState: string): void {
  const e = asTetherError(err);
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>Sign-in failed · Tether</title></head>
<body><main><h1>Sign-in failed</h1><p id="why">${escapeHtml(e.message)}</p><p><a href="/">Back to Tether</a></p></main></body></html>`;
  res
    .writeHead(httpStatusOf(e.code), {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'content-security-policy': "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'set-cookie': clearState,
    })
    .end(html);
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
