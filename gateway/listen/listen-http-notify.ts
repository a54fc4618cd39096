import type { IncomingMessage, ServerResponse } from 'node:http';
import { asTetherError, httpStatusOf, TetherError } from '../../core/errors.js';
import {
  NOTIFY_ANSWER_PATH,
  NOTIFY_LOG_PATH,
  NOTIFY_SETTINGS_PATH,
  NOTIFY_SUBSCRIPTIONS_PATH,
  NOTIFY_TEST_PATH,
  NOTIFY_VISIBILITY_PATH,
  NOTIFY_WEBHOOKS_PATH,
} from '../../core/protocol/http-paths.js';
import type { Door } from '../door/door.js';
import type { Principal } from '../door/principal.js';
import { cookieOf, SESSION_COOKIE } from './http-cookies.js';
import { errorBody, readBody } from './listen-http-login.js';

/** The largest body a notification request may carry (a subscription is well under 1 KiB). */
const MAX_NOTIFY_BODY_BYTES = 8 * 1024;

/** What the notification endpoints reach: the attention room's desk (gateway/attention/attention-desk.ts). */
export interface NotifyEndpoints {
  readonly vapidPublicKey: string | undefined;
  view(p: Principal): unknown;
  subscribe(p: Principal, sub: { endpoint: unknown; keys?: { p256dh?: unknown; auth?: unknown } }): void;
  unsubscribe(p: Principal, endpoint: string): void;
  addWebhook(p: Principal, url: unknown, format?: unknown): { id: string; secret: string };
  removeWebhook(p: Principal, id: string): void;
  answer(p: Principal, id: string, decision: 'allow' | 'deny'): unknown;
  visibility(p: Principal, sessionId: string, visible: boolean): void;
  log(): unknown;
  test(principal: string): Promise<unknown>;
}

type Route = (p: Principal, body: Record<string, unknown>) => unknown;

/**
 * Serves the notification paths (core/protocol/http-paths.ts) on the gateway's HTTP port;
 * false for any other path. Every request is authenticated at the door (a client token, or the
 * page's browser sign-in with an allowed Origin: Door.principalOf); bodies are JSON objects
 * (Content-Type application/json, which a cross-site form cannot send), at most 8 KiB. The log
 * and the test need the admin scope. Answers are JSON; refusals `{"error": {code, message}}`.
 */
export function handleNotifyRequest(
  door: Door,
  endpoints: NotifyEndpoints | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): boolean {
  const path = (req.url ?? '/').split('?')[0];
  const routes = endpoints && routesOf(endpoints);
  const byMethod = routes?.[path];
  if (!byMethod) {
    if (!path.startsWith('/v1/notify/')) return false;
    req.resume();
    json(res, 404, { error: { code: 'NOT_FOUND', message: endpoints ? `no ${path}` : 'notifications are off on this gateway' } });
    return true;
  }
  const route = byMethod[req.method ?? ''];
  if (!route) {
    req.resume();
    res.writeHead(405, { allow: Object.keys(byMethod).join(', '), 'content-type': 'text/plain; charset=utf-8' }).end('method not allowed');
    return true;
  }
  const remote = `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`;
  door
    .principalOf({
      transport: 'http',
      remote,
      authorization: req.headers.authorization,
      origin: req.headers.origin,
      path,
      cookie: cookieOf(req, SESSION_COOKIE),
    })
    .then(async (p) => route(p, req.method === 'GET' ? (req.resume(), {}) : await jsonBody(req)))
    .then(
      (answer) => json(res, 200, answer ?? { ok: true }),
      (err) => json(res, httpStatusOf(asTetherError(err).code), errorBody(err)),
    );
  return true;
}

function routesOf(e: NotifyEndpoints): Record<string, Record<string, Route>> {
  const str = (v: unknown, what: string) => {
    if (typeof v !== 'string' || !v) throw new TetherError('INVALID_ARGUMENT', `the body must carry "${what}"`);
    return v;
  };
  const settings: Route = (p) => ({ vapid_public_key: e.vapidPublicKey ?? null, ...(e.view(p) as object) });
  return {
    // POST too: a page signed in by cookie sends its Origin only with a POST (the door asks for it).
    [NOTIFY_SETTINGS_PATH]: { GET: settings, POST: settings },
    [NOTIFY_SUBSCRIPTIONS_PATH]: {
      POST: (p, b) => e.subscribe(p, b as { endpoint: unknown }),
      DELETE: (p, b) => e.unsubscribe(p, str(b.endpoint, 'endpoint')),
    },
    [NOTIFY_WEBHOOKS_PATH]: { POST: (p, b) => e.addWebhook(p, b.url, b.format), DELETE: (p, b) => e.removeWebhook(p, str(b.id, 'id')) },
    [NOTIFY_ANSWER_PATH]: {
      POST: (p, b) => {
        if (b.decision !== 'allow' && b.decision !== 'deny')
          throw new TetherError('INVALID_ARGUMENT', 'decision must be "allow" or "deny"');
        return e.answer(p, str(b.id, 'id'), b.decision);
      },
    },
    [NOTIFY_VISIBILITY_PATH]: {
      POST: (p, b) => {
        if (typeof b.visible !== 'boolean') throw new TetherError('INVALID_ARGUMENT', 'the body must carry "visible": true or false');
        return e.visibility(p, str(b.session_id, 'session_id'), b.visible);
      },
    },
    [NOTIFY_LOG_PATH]: { GET: (p) => (admin(p), { deliveries: e.log() }) },
    [NOTIFY_TEST_PATH]: { POST: async (p, b) => (admin(p), { deliveries: await e.test(str(b.sub, 'sub')) }) },
  };
}

function admin(p: Principal): void {
  if (!p.canAdmin) throw new TetherError('PERMISSION_DENIED', 'the delivery log and test notifications need the admin scope');
}

async function jsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
    req.resume();
    throw new TetherError('INVALID_ARGUMENT', 'send the body as Content-Type: application/json');
  }
  const text = await readBody(req, MAX_NOTIFY_BODY_BYTES);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new TetherError('INVALID_ARGUMENT', 'the body must be JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new TetherError('INVALID_ARGUMENT', 'the body must be a JSON object');
  return body as Record<string, unknown>;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
}
