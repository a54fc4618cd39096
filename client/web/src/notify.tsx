/** Web Push on this browser: the service worker, and the "Push to this device" toggle (README, "Notifications away from the tab"); the session page's in-tab "Notify me" is another thing. */
import { useEffect, useState } from 'preact/hooks';
import {
  NOTIFY_SETTINGS_PATH,
  NOTIFY_SUBSCRIPTIONS_PATH,
  NOTIFY_VISIBILITY_PATH,
  NOTIFY_WEBHOOKS_PATH,
} from '../../../core/protocol/http-paths.js';
import { apiCall } from './connection';

/** Registers the page's service worker (the installable app's shell, and push). Needs a secure context: https, or this machine. */
export function registerServiceWorker(): void {
  if (!('serviceWorker' in navigator) || !isSecureContext) return;
  void navigator.serviceWorker.register('/sw.js', { scope: '/' }).catch(() => {}); // no worker: the page works as before
}

type State = 'unsupported' | 'off' | 'on' | 'busy' | 'blocked';

/** The Push API's key form of a base64url VAPID public key. */
function keyBytes(b64url: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64url.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** "Push to this device": this browser's push subscription, kept by the gateway for the person signed in. */
export function NotifyToggle() {
  const [state, setState] = useState<State>('busy');
  const [error, setError] = useState<string>();

  useEffect(() => {
    if (!('serviceWorker' in navigator) || !('PushManager' in window) || !isSecureContext) return setState('unsupported');
    void navigator.serviceWorker.ready
      .then((reg) => reg.pushManager.getSubscription())
      .then((sub) => setState(Notification.permission === 'denied' ? 'blocked' : sub ? 'on' : 'off'))
      .catch(() => setState('unsupported'));
  }, []);

  const toggle = async () => {
    setError(undefined);
    const was = state;
    setState('busy');
    try {
      const reg = await navigator.serviceWorker.ready;
      const current = await reg.pushManager.getSubscription();
      if (was === 'on' && current) {
        await apiCall(NOTIFY_SUBSCRIPTIONS_PATH, { endpoint: current.endpoint }, 'DELETE');
        await current.unsubscribe();
        return setState('off');
      }
      if ((await Notification.requestPermission()) !== 'granted') return setState('blocked');
      const { vapid_public_key } = await apiCall<{ vapid_public_key: string | null }>(NOTIFY_SETTINGS_PATH);
      if (!vapid_public_key) throw new Error('Web Push is off on this gateway');
      const sub = current ?? (await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(vapid_public_key) }));
      await apiCall(NOTIFY_SUBSCRIPTIONS_PATH, sub.toJSON());
      setState('on');
    } catch (err) {
      setError((err as Error).message);
      setState(was);
    }
  };

  if (state === 'unsupported') return null;
  return (
    <label
      class="notify-toggle"
      title={error ?? (state === 'blocked' ? 'Notifications are blocked for this site in the browser' : undefined)}
    >
      <input type="checkbox" checked={state === 'on'} disabled={state === 'busy' || state === 'blocked'} onChange={() => void toggle()} />
      Push to this device
    </label>
  );
}

/**
 * Tells the gateway whether this tab on `sessionId` is in sight, now and at each change: a
 * person whose tab is hidden is pushed as if away (the gateway keeps the last report of any tab).
 */
export function useVisibilityReport(sessionId: string): void {
  useEffect(() => {
    const report = () =>
      void apiCall(NOTIFY_VISIBILITY_PATH, { session_id: sessionId, visible: document.visibilityState === 'visible' }).catch(() => {});
    report();
    document.addEventListener('visibilitychange', report);
    return () => document.removeEventListener('visibilitychange', report);
  }, [sessionId]);
}

interface WebhookRow {
  id: string;
  url: string;
  format: string;
}

/**
 * "Webhooks": the person's own webhooks (https only), each with the signing secret the gateway
 * made for it, shown once when it is added (docs/security.md, "Notifications").
 */
export function WebhookSettings() {
  const [rows, setRows] = useState<WebhookRow[]>();
  const [secret, setSecret] = useState<string>();
  const [error, setError] = useState<string>();
  const load = () =>
    apiCall<{ webhooks: WebhookRow[] }>(NOTIFY_SETTINGS_PATH)
      .then((s) => setRows(s.webhooks))
      .catch((err: Error) => setError(err.message));
  const add = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    setError(undefined);
    try {
      const r = await apiCall<{ secret: string }>(NOTIFY_WEBHOOKS_PATH, { url: data.get('url'), format: data.get('format') });
      setSecret(r.secret);
      form.reset();
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const remove = (id: string) =>
    apiCall(NOTIFY_WEBHOOKS_PATH, { id }, 'DELETE')
      .then(load)
      .catch((err: Error) => setError(err.message));
  return (
    <details class="webhook-settings" onToggle={(e) => (e.currentTarget as HTMLDetailsElement).open && void load()}>
      <summary>Webhooks</summary>
      <ul>
        {rows?.map((w) => (
          <li key={w.id}>
            <code>{w.url}</code> ({w.format}){' '}
            <button type="button" onClick={() => void remove(w.id)}>
              Remove
            </button>
          </li>
        ))}
      </ul>
      <form onSubmit={(e) => void add(e)}>
        <input name="url" type="url" required placeholder="https://…" aria-label="Webhook URL" />
        <select name="format" aria-label="Webhook format">
          <option value="json">JSON</option>
          <option value="slack">Slack</option>
          <option value="ntfy">ntfy</option>
        </select>
        <button type="submit">Add webhook</button>
      </form>
      {secret && (
        <p data-testid="webhook-secret">
          Signing secret (shown once): <code>{secret}</code>
        </p>
      )}
      {error && <p role="alert">{error}</p>}
    </details>
  );
}

/**
 * "Follow": this person is told of the session's turns' ends, its ending and its agent's loss
 * away from the tab (push, their own webhooks), as its owner is. Hidden where the gateway keeps
 * no notification settings.
 */
export function FollowToggle(props: { sessionId: string; follow: (on: boolean) => Promise<void> }) {
  const [on, setOn] = useState<boolean>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    apiCall<{ follows: string[] }>(NOTIFY_SETTINGS_PATH)
      .then((s) => setOn(s.follows.includes(props.sessionId)))
      .catch(() => setOn(undefined));
  }, [props.sessionId]);
  if (on === undefined) return null;
  const toggle = () =>
    props.follow(!on).then(
      () => {
        setOn(!on);
        setError(undefined);
      },
      (err: Error) => setError(err.message),
    );
  return (
    <>
      <button
        type="button"
        class="small"
        aria-pressed={on}
        data-testid="follow"
        title="Be told when a turn of this session ends, by push and your webhooks"
        onClick={() => void toggle()}
      >
        {on ? 'Following' : 'Follow'}
      </button>
      {error && <span role="alert">{error}</span>}
    </>
  );
}
