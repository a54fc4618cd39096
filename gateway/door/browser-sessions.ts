import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
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
  /** A use is told to the mirrors at most this often per sign-in (the idle clock survives a restart to within this). */
  useMirrorMs: 60_000,
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
  /** When the mirrors last heard of this sign-in's use. */
  mirroredMs: number;
}

/**
 * A sign-in as a mirror keeps it: the SHA-256 of its cookie (never the cookie), who, its jti
 * and its clock. Enough to rebuild it after a restart or on another gateway of the cluster,
 * nothing a reader could replay as a cookie.
 */
export const BrowserSignInRecord = z.object({
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  identity: z.object({
    sub: z.string().min(1).max(256),
    name: z.string().max(256).optional(),
    scopes: z.array(z.string().max(256)).max(64),
    via: z.enum(['oidc', 'link']),
  }),
  jti: z.string().min(1).max(256),
  issuedAtMs: z.number().int(),
  expiresAtMs: z.number().int(),
  lastUsedMs: z.number().int(),
});
export type BrowserSignInRecord = z.infer<typeof BrowserSignInRecord>;

/** Where sign-ins are kept beyond this process: the state folder's file, the cluster's bucket. */
export interface BrowserSignInMirror {
  put(r: BrowserSignInRecord): void;
  drop(hash: string): void;
}

/**
 * The gateway's browser sign-ins, in memory and told to its mirrors (the state folder's file,
 * so a restart signs no browser out; the cluster's bucket, so a fail-over does not either).
 * The cookie value is 32 random bytes; only its SHA-256 is kept, so nothing here or in a
 * mirror can be replayed as a cookie. A sign-in ends by sign-out, idle timeout, absolute lifetime, revocation or the cap;
 * every end is told to the `onEnd` listeners with the sign-in's jti, so the connections it
 * bought are closed too.
 */
export class BrowserSessions {
  private readonly byHash = new Map<string, BrowserSession>();
  private readonly listeners = new Set<(jti: string, why: string) => void>();
  private readonly mirrors = new Set<BrowserSignInMirror>();
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
    const key = hash(cookie);
    const s: BrowserSession = {
      identity,
      token: { kind: 'client', principal, jti, issuedAt: new Date(now), expiresAt: new Date(now + this.limits.absoluteMs) },
      lastUsedMs: now,
      mirroredMs: now,
    };
    this.byHash.set(key, s);
    for (const m of this.mirrors) m.put(recordOf(key, s));
    return cookie;
  }

  /** Every live sign-in as a mirror keeps it (what a new mirror starts from). */
  records(): BrowserSignInRecord[] {
    return [...this.byHash].map(([key, s]) => recordOf(key, s));
  }

  /**
   * Takes in a sign-in a mirror kept (read back after a restart, or made on another gateway),
   * told to no mirror; one already over its lifetime or idle time is not taken. A later use
   * wins over an earlier one.
   */
  adopt(r: BrowserSignInRecord): void {
    const now = this.now();
    if (now >= r.expiresAtMs || now - r.lastUsedMs >= this.limits.idleMs) return;
    const known = this.byHash.get(r.hash);
    if (known) {
      known.lastUsedMs = Math.max(known.lastUsedMs, r.lastUsedMs);
      return;
    }
    if (this.byHash.size >= this.limits.maxSessions) return;
    const principal = { ...principalFromScopes(r.identity.sub, r.identity.scopes), name: r.identity.name };
    this.byHash.set(r.hash, {
      identity: r.identity,
      token: { kind: 'client', principal, jti: r.jti, issuedAt: new Date(r.issuedAtMs), expiresAt: new Date(r.expiresAtMs) },
      lastUsedMs: r.lastUsedMs,
      mirroredMs: r.lastUsedMs,
    });
  }

  /** A mirror says a sign-in ended elsewhere (signed out on another gateway): it ends here too, connections included. */
  forget(hashed: string, why = 'signed out'): void {
    const s = this.byHash.get(hashed);
    if (s) this.endKey(hashed, s, why, false);
  }

  /** Tells `m` of every sign-in from now on (it should start from records()). Returns the function that stops it. */
  mirrorTo(m: BrowserSignInMirror): () => void {
    this.mirrors.add(m);
    return () => this.mirrors.delete(m);
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
    if (now - s.mirroredMs >= this.limits.useMirrorMs) {
      s.mirroredMs = now;
      for (const m of this.mirrors) m.put(recordOf(key, s));
    }
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

  private endKey(key: string, s: BrowserSession, why: string, tellMirrors = true): void {
    this.byHash.delete(key);
    if (tellMirrors) for (const m of this.mirrors) m.drop(key);
    for (const fn of this.listeners) fn(s.token.jti, why);
  }

  private evictOldest(): void {
    let oldest: [string, BrowserSession] | undefined;
    for (const e of this.byHash) if (!oldest || e[1].lastUsedMs < oldest[1].lastUsedMs) oldest = e;
    if (oldest) this.endKey(oldest[0], oldest[1], 'too many browser sign-ins on this gateway');
  }
}

function recordOf(key: string, s: BrowserSession): BrowserSignInRecord {
  return {
    hash: key,
    identity: s.identity,
    jti: s.token.jti,
    issuedAtMs: s.token.issuedAt.getTime(),
    expiresAtMs: s.token.expiresAt.getTime(),
    lastUsedMs: s.lastUsedMs,
  };
}

function hash(cookie: string): string {
  return createHash('sha256').update(cookie).digest('hex');
}
