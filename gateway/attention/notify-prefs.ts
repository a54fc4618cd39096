import { chmodSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { TetherError } from '../../core/errors.js';
import type { WebhookFormat } from './notify-keys.js';

/** A browser's push subscription, as PushSubscription.toJSON() gives it. */
export interface PushSubscriptionRecord {
  endpoint: string;
  keys: { p256dh: string; auth: string };
  created_at: string;
}

/** A person's own webhook: its secret is the gateway's (made when it was added, shown once). */
export interface PersonWebhook {
  id: string;
  url: string;
  secret: string;
  format: WebhookFormat;
  created_at: string;
}

/** What one person asked to be notified by, and of which sessions besides their own. */
export interface PersonPrefs {
  subscriptions: PushSubscriptionRecord[];
  webhooks: PersonWebhook[];
  /** Sessions they follow (session.follow): told of their turns' ends, endings and agent losses as the owner is. */
  follows: string[];
}

/** Per person: browsers (push subscriptions), own webhooks and sessions followed. */
export const PREFS_LIMITS = { subscriptions: 10, webhooks: 5, follows: 100 };

/**
 * Where people's notification settings are kept, per principal: in the state folder, or in a
 * cluster the shared store. `update` applies a change and keeps it before it returns.
 */
export interface PrefsStore {
  get(principal: string): PersonPrefs;
  update(principal: string, change: (p: PersonPrefs) => PersonPrefs): PersonPrefs;
  /** Who follows `sessionId`. */
  followersOf(sessionId: string): string[];
}

export const EMPTY_PREFS: PersonPrefs = { subscriptions: [], webhooks: [], follows: [] };

/** Checks the bounds of a changed PersonPrefs (RESOURCE_EXHAUSTED past them). */
export function checkPrefs(p: PersonPrefs): PersonPrefs {
  if (p.subscriptions.length > PREFS_LIMITS.subscriptions)
    throw new TetherError(
      'RESOURCE_EXHAUSTED',
      `at most ${PREFS_LIMITS.subscriptions} browsers may be notified per person: turn one off first`,
    );
  if (p.webhooks.length > PREFS_LIMITS.webhooks)
    throw new TetherError('RESOURCE_EXHAUSTED', `at most ${PREFS_LIMITS.webhooks} webhooks per person: remove one first`);
  if (p.follows.length > PREFS_LIMITS.follows)
    throw new TetherError('RESOURCE_EXHAUSTED', `at most ${PREFS_LIMITS.follows} sessions may be followed per person: unfollow one first`);
  return p;
}

/** In memory (tests, and gateways without a state folder). */
export class MemoryPrefsStore implements PrefsStore {
  protected readonly all = new Map<string, PersonPrefs>();

  get(principal: string): PersonPrefs {
    return this.all.get(principal) ?? EMPTY_PREFS;
  }

  update(principal: string, change: (p: PersonPrefs) => PersonPrefs): PersonPrefs {
    const next = checkPrefs(change(this.get(principal)));
    this.all.set(principal, next);
    this.persist(principal, next);
    return next;
  }

  followersOf(sessionId: string): string[] {
    return [...this.all].filter(([, p]) => p.follows.includes(sessionId)).map(([principal]) => principal);
  }

  /** Takes in a person's settings kept elsewhere (a file read, the cluster's bucket): not persisted again. */
  take(principal: string, prefs: Partial<PersonPrefs> | undefined): void {
    if (prefs) this.all.set(principal, { ...EMPTY_PREFS, ...prefs });
    else this.all.delete(principal);
  }

  protected persist(_principal: string, _prefs: PersonPrefs): void {}
}

/** One JSON file in the state folder (owner-only: it holds webhook secrets), rewritten whole through a temporary file. */
export class FilePrefsStore extends MemoryPrefsStore {
  constructor(private readonly path: string) {
    super();
    if (!existsSync(path)) return;
    let saved: Record<string, PersonPrefs>;
    try {
      saved = JSON.parse(readFileSync(path, 'utf8')) as Record<string, PersonPrefs>;
    } catch (err) {
      throw new Error(`${path} (people's notification settings) cannot be read: ${(err as Error).message}; fix or remove it`);
    }
    for (const [principal, prefs] of Object.entries(saved)) this.take(principal, prefs);
  }

  protected override persist(): void {
    const tmp = `${this.path}.tmp`;
    writeFileSync(tmp, JSON.stringify(Object.fromEntries(this.all)), { mode: 0o600 });
    chmodSync(tmp, 0o600);
    renameSync(tmp, this.path);
  }
}
