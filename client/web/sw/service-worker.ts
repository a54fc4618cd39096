/// <reference lib="webworker" />
/**
 * The page's service worker (served at /sw.js, scope /): it keeps the page's shell for an
 * installed app, shows the gateway's Web Push notifications (one per event id: the id is the
 * notification's tag), answers Allow/Deny through the browser's sign-in (the cookie, sent with
 * the Origin of the page), and opens the session when a notification is clicked.
 */
import { ATTENTION_TITLES, NOTIFICATION_CLICK_MESSAGE, type AttentionPush } from '../../../core/protocol/attention.js';
import { NOTIFY_ANSWER_PATH } from '../../../core/protocol/http-paths.js';

declare const self: ServiceWorkerGlobalScope;

/** Bumped with the shell's files: an old cache is dropped when a new worker activates. */
const CACHE = 'tether-shell-v1';
const SHELL = ['/', '/app.js', '/styles.css', '/manifest.webmanifest', '/icon.svg', '/icon-192.png'];

self.addEventListener('install', (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((c) => c.addAll(SHELL))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

// The shell: from the network first (sign-in and fresh builds), the cache when offline. The API is never cached.
self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin || !SHELL.includes(url.pathname)) return;
  event.respondWith(fetch(event.request).catch(async () => (await caches.match(event.request)) ?? Response.error()));
});

self.addEventListener('push', (event) => {
  let push: AttentionPush;
  try {
    push = event.data?.json() as AttentionPush;
  } catch {
    return;
  }
  if (!push || typeof push.id !== 'string' || !(push.type in ATTENTION_TITLES)) return;
  event.waitUntil(show(push));
});

/** One notification per event: its tag is the event id, so the same event again replaces it. */
function show(push: AttentionPush): Promise<void> {
  const actions = push.answerable
    ? [
        { action: 'allow', title: 'Allow' },
        { action: 'deny', title: 'Deny' },
      ]
    : [];
  return self.registration.showNotification(`${ATTENTION_TITLES[push.type]}: ${push.agent}`, {
    body: push.summary,
    tag: push.id,
    data: push,
    requireInteraction: push.type === 'permission_request' || push.type === 'question',
    icon: '/icon-192.png',
    // `actions` is in Chromium's NotificationOptions, not yet in TypeScript's DOM types.
    ...({ actions } as object),
  });
}

/** What a click came to: the answer sent (or refused, with the gateway's words), or the session opened. */
interface ClickResult {
  ok: boolean;
  message: string;
}

self.addEventListener('notificationclick', (event) => {
  event.waitUntil(clicked(event.notification, event.action));
});

self.addEventListener('message', (event) => {
  const m = event.data as { type?: string; tag?: string; action?: string } | undefined;
  if (m?.type !== NOTIFICATION_CLICK_MESSAGE || typeof m.tag !== 'string') return;
  const reply = event.ports[0];
  event.waitUntil(
    self.registration
      .getNotifications({ tag: m.tag })
      .then((found) => (found[0] ? clicked(found[0], m.action ?? '') : { ok: false, message: `no notification ${m.tag}` }))
      .catch((err: Error) => ({ ok: false, message: err.message }))
      .then((result) => reply?.postMessage(result)),
  );
});

/**
 * A notification clicked: Allow or Deny answers the prompt (POST NOTIFY_ANSWER_PATH with the
 * browser's sign-in; a late answer is told who answered first, in a notification of its own);
 * the notification itself opens the session, in a tab of the page if one is open.
 */
async function clicked(n: Notification, action: string): Promise<ClickResult> {
  const push = n.data as AttentionPush;
  n.close();
  if ((action === 'allow' || action === 'deny') && push.answerable) {
    const res = await fetch(NOTIFY_ANSWER_PATH, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: push.id, decision: action }),
    }).catch((err: Error) => ({ ok: false, json: async () => ({ error: { message: err.message } }) }));
    const body = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
    const result = res.ok
      ? { ok: true, message: action === 'allow' ? 'Allowed' : 'Denied' }
      : { ok: false, message: body.error?.message ?? 'the answer was not taken' };
    await self.registration.showNotification(`${result.ok ? result.message : 'Not answered'}: ${push.agent}`, {
      body: result.ok ? push.summary : result.message,
      tag: `${push.id}:answer`,
    });
    return result;
  }
  const url = new URL(`/#session=${encodeURIComponent(push.session_id)}`, self.location.origin).href;
  // A tab this worker controls is reused (navigate works only on those); otherwise a new one.
  // Focus is a courtesy: a browser allows it only in a real click.
  const [tab] = await self.clients.matchAll({ type: 'window' });
  const opened = tab ? await tab.navigate(url) : await self.clients.openWindow(url);
  await opened?.focus().catch(() => {});
  return opened ? { ok: true, message: 'opened the session' } : { ok: false, message: 'the session could not be opened' };
}
