import { randomBytes, randomUUID } from 'node:crypto';
import { asTetherError, TetherError } from '../../core/errors.js';
import type { Principal } from '../door/principal.js';
import type { SessionDirectory } from '../directory/session-directory.js';
import { budgetAttention, deriveAttention } from './attention-events.js';
import type { BudgetNotice } from '../usage/usage-desk.js';
import type { Notifier } from './notifier.js';
import type { WebhookFormat } from './notify-keys.js';
import type { PersonPrefs, PushSubscriptionRecord } from './notify-prefs.js';

/** Visibility reports remembered (principal and session), the oldest forgotten first. */
const MAX_VISIBILITY_REPORTS = 4096;

/** Prompts remembered by event id, so an answer from a notification finds its session (and a late one hears who won). */
const MAX_REMEMBERED_PROMPTS = 4096;

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** One prompt as a notification names it. */
interface KnownPrompt {
  sessionId: string;
  requestId: string;
  /** How it was settled ("allow by bob"), once it was. */
  settled?: string;
}

/** What a person's settings show: browsers by endpoint origin, webhooks without their secret. */
export interface PrefsView {
  subscriptions: { endpoint: string; created_at: string }[];
  webhooks: { id: string; url: string; format: WebhookFormat; created_at: string }[];
  /** Sessions the person follows. */
  follows: string[];
}

/**
 * The attention room's face: turns what sessions notice into events (attention-events.ts) for
 * the notifier, keeps who may be told by what (people's settings), and takes answers from
 * notifications. Built by the composition root over the gateway's directory.
 */
export class AttentionDesk {
  private readonly prompts = new Map<string, KnownPrompt>();
  private readonly byRequest = new Map<string, string>();
  /** Principal and session whose page last said its tab is out of sight (the last report of any tab wins). */
  private readonly hiddenTabs = new Set<string>();

  constructor(
    private readonly directory: SessionDirectory,
    readonly notifier: Notifier,
    private readonly opts: { allowHttpLoopback: boolean; budgets?: { onNotice(fn: (n: BudgetNotice) => void): () => void } },
  ) {
    // Budget warnings go to the person whose turn crossed the mark (issue #35: to webhooks and push too).
    opts.budgets?.onNotice((n) => {
      const session = directory.get(n.session_id);
      if (session) notifier.handle(budgetAttention(session, n, (principal) => this.hiddenTabs.has(`${principal}\u0000${n.session_id}`)));
    });
    directory.follow = (principal, sessionId, on) =>
      void notifier.prefsStore.update(principal, (x) => ({
        ...x,
        follows: on ? [...x.follows.filter((id) => id !== sessionId), sessionId] : x.follows.filter((id) => id !== sessionId),
      }));
    directory.notices = (sessionId, n) => {
      const key = `${sessionId}\u0000${n.kind === 'prompt' || n.kind === 'prompt_settled' ? n.requestId : ''}`;
      if (n.kind === 'prompt_settled') {
        const known = this.prompts.get(this.byRequest.get(key) ?? '');
        if (known) known.settled = n.how;
        return;
      }
      const session = directory.get(sessionId);
      const hidden = (principal: string) => this.hiddenTabs.has(`${principal}\u0000${sessionId}`);
      const a = session && deriveAttention(session, n, hidden, new Date(), notifier.prefsStore.followersOf(sessionId));
      if (!a) return;
      if (n.kind === 'prompt') this.remember(a.event.id, key, { sessionId, requestId: n.requestId });
      notifier.handle(a);
    };
  }

  private remember(id: string, key: string, p: KnownPrompt): void {
    this.prompts.set(id, p);
    this.byRequest.set(key, id);
    if (this.prompts.size > MAX_REMEMBERED_PROMPTS) {
      const [oldId, old] = this.prompts.entries().next().value as [string, KnownPrompt];
      this.prompts.delete(oldId);
      this.byRequest.delete(`${old.sessionId}\u0000${old.requestId}`);
    }
  }

  /**
   * Allow or deny from a notification (`id`: the event's): the same first-answer-wins path an
   * attached client's answer takes. FAILED_PRECONDITION "already answered" names who won.
   */
  answer(p: Principal, id: string, decision: 'allow' | 'deny'): { session_id: string; request_id: string } {
    const known = this.prompts.get(id);
    if (!known) throw new TetherError('NOT_FOUND', `no prompt ${id} on this gateway`);
    const already = () =>
      new TetherError('FAILED_PRECONDITION', `already answered: ${known.settled}`, { already_decided: true, how: known.settled });
    if (known.settled) throw already();
    const session = this.directory.visible(p, known.sessionId);
    try {
      session.answerAsPerson(p, known.requestId, decision);
    } catch (err) {
      if (known.settled && asTetherError(err).code === 'FAILED_PRECONDITION') throw already();
      throw err;
    }
    return { session_id: known.sessionId, request_id: known.requestId };
  }

  /** The gateway's VAPID public key (browsers subscribe with it); undefined without Web Push. */
  get vapidPublicKey(): string | undefined {
    return this.notifier.vapidPublicKey;
  }

  /** The delivery log, newest last. */
  log(): unknown {
    return this.notifier.log.recent();
  }

  /** See Notifier.test. */
  test(principal: string): Promise<unknown> {
    return this.notifier.test(principal);
  }

  /**
   * The page says whether its tab on a session is in sight (document.visibilityState). A person
   * whose tab is hidden is notified as if away; the last report of any of their tabs wins.
   */
  visibility(p: Principal, sessionId: string, visible: boolean): void {
    this.directory.visible(p, sessionId); // NOT_FOUND for a session the person cannot see
    const key = `${p.sub}\u0000${sessionId}`;
    this.hiddenTabs.delete(key);
    if (visible) return;
    this.hiddenTabs.add(key);
    if (this.hiddenTabs.size > MAX_VISIBILITY_REPORTS) this.hiddenTabs.delete(this.hiddenTabs.values().next().value as string);
  }

  /** A browser opts in (its PushSubscription); the same endpoint again replaces its keys. */
  subscribe(p: Principal, sub: { endpoint: unknown; keys?: { p256dh?: unknown; auth?: unknown } }): void {
    if (!this.notifier.vapidPublicKey) throw new TetherError('FAILED_PRECONDITION', 'Web Push is off on this gateway');
    const endpoint = this.checkedUrl(sub.endpoint, 'the subscription endpoint');
    const { p256dh, auth } = sub.keys ?? {};
    if (typeof p256dh !== 'string' || typeof auth !== 'string' || !/^[\w-]+$/.test(p256dh) || !/^[\w-]+$/.test(auth))
      throw new TetherError(
        'INVALID_ARGUMENT',
        'a subscription needs keys.p256dh and keys.auth (base64url), as PushSubscription.toJSON() gives them',
      );
    const record: PushSubscriptionRecord = { endpoint, keys: { p256dh, auth }, created_at: new Date().toISOString() };
    this.notifier.prefsStore.update(p.sub, (x) => ({
      ...x,
      subscriptions: [...x.subscriptions.filter((s) => s.endpoint !== endpoint), record],
    }));
  }

  /** A browser opts out. */
  unsubscribe(p: Principal, endpoint: string): void {
    this.notifier.prefsStore.update(p.sub, (x) => ({ ...x, subscriptions: x.subscriptions.filter((s) => s.endpoint !== endpoint) }));
  }

  /** A person adds a webhook of their own; the answer holds its secret, shown this once. */
  addWebhook(p: Principal, url: unknown, format: unknown = 'json'): { id: string; secret: string } {
    const checked = this.checkedUrl(url, 'the webhook URL');
    if (format !== 'json' && format !== 'slack' && format !== 'ntfy')
      throw new TetherError('INVALID_ARGUMENT', 'format must be json, slack or ntfy');
    const hook = {
      id: randomUUID(),
      url: checked,
      secret: randomBytes(32).toString('base64url'),
      format,
      created_at: new Date().toISOString(),
    } as const;
    this.notifier.prefsStore.update(p.sub, (x) => ({ ...x, webhooks: [...x.webhooks, hook] }));
    return { id: hook.id, secret: hook.secret };
  }

  removeWebhook(p: Principal, id: string): void {
    this.notifier.prefsStore.update(p.sub, (x) => ({ ...x, webhooks: x.webhooks.filter((w) => w.id !== id) }));
  }

  /** A person's settings, secrets left out. */
  view(p: Principal): PrefsView {
    const x: PersonPrefs = this.notifier.prefsStore.get(p.sub);
    return {
      subscriptions: x.subscriptions.map((s) => ({ endpoint: s.endpoint, created_at: s.created_at })),
      webhooks: x.webhooks.map((w) => ({ id: w.id, url: w.url, format: w.format, created_at: w.created_at })),
      follows: x.follows,
    };
  }

  /**
   * A URL a person gave (their webhook, their browser's push endpoint): https only, since the
   * gateway will POST to it (docs/security.md, SSRF); plain http only to this machine, and only
   * when the operator allowed it (notifyAllowHttpLoopback).
   */
  private checkedUrl(url: unknown, what: string): string {
    if (typeof url !== 'string' || url.length > 2048 || !URL.canParse(url))
      throw new TetherError('INVALID_ARGUMENT', `${what} must be a URL`);
    const u = new URL(url);
    if (u.username || u.password) throw new TetherError('INVALID_ARGUMENT', `${what} may not carry a user or password`);
    if (u.protocol === 'https:') return url;
    if (u.protocol === 'http:' && LOOPBACK_HOSTS.has(u.hostname) && this.opts.allowHttpLoopback) return url;
    throw new TetherError(
      'INVALID_ARGUMENT',
      `${what} must be https${this.opts.allowHttpLoopback ? ' (or http to this machine)' : ''}, got ${u.protocol}//${u.host}`,
    );
  }
}
