import { createHash, randomBytes } from 'node:crypto';
import type { VerifiedToken } from '../../core/auth/verify.js';
import { principalFromScopes } from '../../core/auth/scopes.js';
import { TetherError } from '../../core/errors.js';

/** How long a browser sign-in lasts: idle (no ticket bought) and absolute, and how many are kept. */
export const BROWSER_SESSION_DEFAULTS = {
  /** A sign-in that bought no ticket for this long ends (a tab reconnecting buys one). */
  idleMs: 8 * 3600_000,
  /** A sign-in ends this long after it began, whatever its use; its live connections too. */
  absoluteMs: 7 * 24 * 3600_000,
  /** Live sign-ins at most; beyond, the least recently used is ended. */
  maxSessions: 10_000,
};

/** Who signed in, as the browser sign-in keeps it. */
export interface BrowserIdentity {
  /** The stable subject (audit, revocation). */
  sub: string;
  /** A display name, where the identity provider gave one. */
  name?: string;
  /** The scopes the sign-in grants (core/auth/scopes.ts). */
  scopes: string[];
  /** How the person signed in. */
  via: 'oidc' | 'link';
}

/** One live browser sign-in. */
export interface BrowserSession {
  identity: BrowserIdentity;
  /** What a ticket bought with it carries: its principal, a jti of its own, its start and its absolute end. */
  token: VerifiedToken;
  lastUsedMs: number;
}

/**
 * The gateway's browser sign-ins, in memory (a restart signs every browser out). The cookie
 * value is 32 random bytes; only its SHA-256 is kept, so nothing here can be replayed as a
 * cookie. A sign-in ends by sign-out, idle timeout, absolute lifetime, revocation or the cap;
 * every end is told to the `onEnd` listeners with the sign-in's jti, so the connections it
 * bought are closed too.
 */
export class BrowserSessions {
  private readonly byHash = new Map<string, BrowserSession>();
  private readonly listeners = new Set<(jti: string, why: string) => void>();
  private readonly limits: typeof BROWSER_SESSION_DEFAULTS;
  private readonly now: () => number;

  constructor(opts: Partial<typeof BROWSER_SESSION_DEFAULTS> & { now?: () => number } = {}) {
    this.limits = { ...BROWSER_SESSION_DEFAULTS, ...opts };
    this.now = opts.now ?? Date.now;
  }

  /** Live sign-ins (expired ones are dropped when met). */
  get size(): number {
    return this.byHash.size;
  }

  /** Seconds a new sign-in's cookie lives (its absolute lifetime). */
  get maxAgeSeconds(): number {
    return Math.floor(this.limits.absoluteMs / 1000);
  }

  /** Starts a sign-in; returns the cookie value to hand the browser (never kept here). */
  create(identity: BrowserIdentity): string {
    const principal = { ...principalFromScopes(identity.sub, identity.scopes), name: identity.name };
    const cookie = randomBytes(32).toString('base64url');
    const now = this.now();
    if (this.byHash.size >= this.limits.maxSessions) this.evictOldest();
    const jti = `browser-${randomBytes(9).toString('base64url')}`;
    this.byHash.set(hash(cookie), {
      identity,
      token: { kind: 'client', principal, jti, issuedAt: new Date(now), expiresAt: new Date(now + this.limits.absoluteMs) },
      lastUsedMs: now,
    });
    return cookie;
  }

  /**
   * The live sign-in a cookie value holds, marked as used now; UNAUTHENTICATED with reason
   * `no_session` without a cookie, `signed_out` for an unknown, ended or expired one, saying
   * which in plain words.
   */
  use(cookie: string | undefined): BrowserSession {
    if (!cookie)
      throw new TetherError(
        'UNAUTHENTICATED',
        "not signed in (send a client token as Authorization: Bearer, or sign in on the gateway's page)",
        { reason: 'no_session' },
      );
    const key = hash(cookie);
    const s = this.byHash.get(key);
    if (!s)
      throw new TetherError(
        'UNAUTHENTICATED',
        'this browser’s sign-in has ended (signed out, revoked, or the gateway restarted): sign in again',
        { reason: 'signed_out' },
      );
    const now = this.now();
    const why =
      now >= s.token.expiresAt.getTime()
        ? 'its lifetime is over'
        : now - s.lastUsedMs >= this.limits.idleMs
          ? 'it was idle too long'
          : undefined;
    if (why) {
      this.endKey(key, s, why);
      throw new TetherError('UNAUTHENTICATED', `this browser’s sign-in has ended (${why}): sign in again`, { reason: 'signed_out' });
    }
    s.lastUsedMs = now;
    return s;
  }

  /** Ends the sign-in a cookie value holds (sign-out); false when there was none. */
  end(cookie: string | undefined, why = 'signed out'): boolean {
    if (!cookie) return false;
    const key = hash(cookie);
    const s = this.byHash.get(key);
    if (s) this.endKey(key, s, why);
    return s !== undefined;
  }

  /** Ends every sign-in `ended` picks (revocation); returns how many ended. */
  endWhere(ended: (s: BrowserSession) => boolean, why: string): number {
    let n = 0;
    for (const [key, s] of this.byHash) {
      if (!ended(s)) continue;
      this.endKey(key, s, why);
      n++;
    }
    return n;
  }

  /** Calls `fn(jti, why)` whenever a sign-in ends. Returns the function that stops it. */
  onEnd(fn: (jti: string, why: string) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private endKey(key: string, s: BrowserSession, why: string): void {
    this.byHash.delete(key);
    for (const fn of this.listeners) fn(s.token.jti, why);
  }

  private evictOldest(): void {
    let oldest: [string, BrowserSession] | undefined;
    for (const e of this.byHash) if (!oldest || e[1].lastUsedMs < oldest[1].lastUsedMs) oldest = e;
    if (oldest) this.endKey(oldest[0], oldest[1], 'too many browser sign-ins on this gateway');
  }
}

function hash(cookie: string): string {
  return createHash('sha256').update(cookie).digest('hex');
}
