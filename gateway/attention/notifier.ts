import { randomBytes } from 'node:crypto';
import type { Logger } from '../../core/logging.js';
import type { AttentionEvent, AttentionPush } from '../../core/protocol/attention.js';
import type { NotifyChannel, NotifyOutcome } from '../metrics.js';
import type { Attention } from './attention-events.js';
import { DeliveryLog, RETRY_DEFAULTS, withRetries, type DeliveryRecord, type RetryLimits } from './delivery.js';
import type { WebhookTarget } from './notify-keys.js';
import type { PersonWebhook, PrefsStore, PushSubscriptionRecord } from './notify-prefs.js';
import type { PushSender } from './push-sender.js';
import { redactedUrl, shapeWebhook, signatureHeaders } from './webhook-shapes.js';

/** Event ids remembered as sent (one delivery per id, however often it is derived or retried). */
const MAX_REMEMBERED_IDS = 4096;

/** What the notifier reports to the gateway's metrics. */
export interface NotifyMetrics {
  notification(channel: NotifyChannel, outcome: NotifyOutcome): void;
}

export interface NotifierOptions {
  /** The operator's webhooks: every event (of their `events`), whoever it is for. */
  webhooks: readonly WebhookTarget[];
  /** People's own push subscriptions and webhooks. */
  prefs: PrefsStore;
  /** Absent: no Web Push (no VAPID keys). */
  push?: PushSender;
  metrics?: NotifyMetrics;
  logger: Logger;
  retry?: Partial<RetryLimits>;
  /** The page's origin for links in webhooks (a session's page is ORIGIN/#/session/ID); undefined: no links. */
  origin?: () => string | undefined;
}

/**
 * Delivers attention events: to the operator's webhooks, and to each recipient's push
 * subscriptions and own webhooks unless they have the session open (suppressed). One delivery
 * per event id; each retried with backoff on network errors and 5xx (delivery.ts); every
 * outcome counted and written to a bounded delivery log (never a secret, a body or a full URL).
 * A subscription the push service says is gone (404, 410) is dropped.
 */
export class Notifier {
  readonly log = new DeliveryLog();
  private readonly sent = new Set<string>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly retry: RetryLimits;

  constructor(private readonly o: NotifierOptions) {
    this.retry = { ...RETRY_DEFAULTS, ...o.retry };
  }

  /** People's settings (the desk changes them). */
  get prefsStore(): PrefsStore {
    return this.o.prefs;
  }

  /** The VAPID public key browsers subscribe with; undefined without Web Push. */
  get vapidPublicKey(): string | undefined {
    return this.o.push?.publicKey;
  }

  /** Delivers one event unless its id was delivered already. */
  handle(a: Attention): void {
    if (this.sent.has(a.event.id)) return;
    this.sent.add(a.event.id);
    if (this.sent.size > MAX_REMEMBERED_IDS) this.sent.delete(this.sent.values().next().value as string);
    for (const w of this.o.webhooks) if (!w.events || w.events.includes(a.event.type)) this.track(this.postWebhook(w, a.event, undefined));
    for (const r of a.recipients) {
      const prefs = this.o.prefs.get(r.principal);
      if (r.present) {
        for (const _ of prefs.webhooks) this.o.metrics?.notification('webhook', 'suppressed');
        for (const _ of prefs.subscriptions) this.o.metrics?.notification('push', 'suppressed');
        continue;
      }
      for (const w of prefs.webhooks) this.track(this.postWebhook(w, a.event, r.principal));
      const push: AttentionPush = { ...withoutAnswerers(a.event), answerable: r.mayAnswer && a.event.type === 'permission_request' };
      for (const s of prefs.subscriptions) this.track(this.pushTo(r.principal, s, push));
    }
  }

  /**
   * `tether notify test --sub NAME`: a test event to that person's subscriptions and own webhooks
   * (not the operator's), awaited; the records of how each went.
   */
  async test(principal: string): Promise<DeliveryRecord[]> {
    const event: AttentionEvent = {
      id: `test-${randomBytes(8).toString('base64url')}`,
      type: 'turn_complete',
      session_id: 'test',
      agent: 'tether',
      at: new Date().toISOString(),
      summary: 'A test notification from the gateway',
    };
    const before = this.log.recent().length;
    const prefs = this.o.prefs.get(principal);
    await Promise.all([
      ...prefs.webhooks.map((w) => this.postWebhook(w, event, principal)),
      ...prefs.subscriptions.map((s) => this.pushTo(principal, s, { ...event, answerable: false })),
    ]);
    return this.log
      .recent()
      .slice(before)
      .filter((r) => r.event_id === event.id);
  }

  /** Waits for the deliveries in flight (bounded by their retries). */
  async settled(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  private track(p: Promise<void>): void {
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  private async postWebhook(w: WebhookTarget | PersonWebhook, event: AttentionEvent, principal: string | undefined): Promise<void> {
    const link = this.o.origin?.() ? `${this.o.origin()}/#session=${encodeURIComponent(event.session_id)}` : undefined;
    const req = shapeWebhook(w.format, w.url, event, link);
    const result = await withRetries(async (signal) => {
      const headers = { 'content-type': 'application/json', ...(w.secret ? signatureHeaders(w.secret, req.body) : {}) };
      const res = await fetch(req.url, { method: 'POST', headers, body: req.body, signal, redirect: 'manual' });
      await res.arrayBuffer().catch(() => undefined);
      return { status: res.status };
    }, this.retry);
    this.record('webhook', event, redactedUrl(w.url), principal, result.ok ? 'sent' : 'failed', result);
  }

  private async pushTo(principal: string, sub: PushSubscriptionRecord, push: AttentionPush): Promise<void> {
    const sender = this.o.push;
    if (!sender) return;
    const result = await withRetries((signal) => sender.send(sub, JSON.stringify(push), push.id, signal), this.retry);
    const gone = 'status' in result.last && (result.last.status === 404 || result.last.status === 410);
    if (gone) this.o.prefs.update(principal, (p) => ({ ...p, subscriptions: p.subscriptions.filter((s) => s.endpoint !== sub.endpoint) }));
    this.record('push', push, redactedUrl(sub.endpoint), principal, result.ok ? 'sent' : gone ? 'dropped' : 'failed', result);
  }

  private record(
    channel: NotifyChannel,
    event: AttentionEvent,
    target: string,
    principal: string | undefined,
    outcome: DeliveryRecord['outcome'],
    r: { attempts: number; last: { status: number } | { error: string } },
  ): void {
    this.o.metrics?.notification(channel, outcome);
    this.log.add({
      at: new Date().toISOString(),
      event_id: event.id,
      type: event.type,
      channel,
      target,
      ...(principal ? { principal } : {}),
      outcome,
      attempts: r.attempts,
      ...('status' in r.last ? { status: r.last.status } : { error: r.last.error.slice(0, 200) }),
    });
    if (outcome !== 'sent')
      this.o.logger.warn({ channel, target, eventId: event.id, outcome, attempts: r.attempts }, 'a notification was not delivered');
  }
}

/** A push carries no list of who else may answer: only whether this person may. */
function withoutAnswerers(e: AttentionEvent): AttentionEvent {
  const { may_answer: _, ...rest } = e;
  return rest;
}
