import type { VerifiedToken } from '../../core/auth/verify.js';
import type { Channel } from '../../core/channel/channel.js';
import { TetherError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/logging.js';
import type { RevocationList } from './revocations.js';

/** Longest single timer (setTimeout overflows past 2^31-1 ms and would fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A connection whose token is watched: a Channel, or an `/acp` WebSocket seen the same way.
 * `close` ends it (idempotent); `closed` settles once it has ended, whoever ended it.
 */
export type Watched = Pick<Channel, 'remote' | 'close'> & { readonly closed: Promise<unknown> };

interface Tracked {
  token: VerifiedToken;
  timer?: NodeJS.Timeout;
}

/**
 * The tokens of live connections (threats A8, A9). A connection is closed with
 * UNAUTHENTICATED ("token expired") once its token's `exp` plus the allowed clock skew has
 * passed, unless it renewed it first (auth.renew); a connection whose token is revoked is
 * closed with PERMISSION_DENIED ("token revoked") as soon as the revocation list changes.
 * Connections without a token (authentication off) are never tracked.
 */
export class LiveTokens {
  private readonly live = new Map<Watched, Tracked>();
  private readonly log: Logger;
  private readonly stopWatching: (() => void) | undefined;

  constructor(
    private readonly opts: {
      /** Extra time past `exp` before the close (the verifier's clock tolerance). */
      skewMs: number;
      revocations?: RevocationList;
      logger?: Logger;
      /** The token clock, epoch ms (the verifier's; default Date.now). */
      now?: () => number;
    },
  ) {
    this.log = opts.logger ?? silentLogger;
    this.stopWatching = opts.revocations?.onChange(() => this.sweepRevoked());
  }

  /** Connections tracked now. */
  get size(): number {
    return this.live.size;
  }

  /** Tracks a connection admitted with `token` until it closes. */
  track(channel: Watched, token: VerifiedToken): void {
    const t: Tracked = { token };
    this.live.set(channel, t);
    this.arm(channel, t);
    void channel.closed.then(() => {
      clearTimeout(t.timer);
      this.live.delete(channel);
    });
  }

  /**
   * Replaces a live connection's token with a fresh one that passed the door. The new token
   * must be for the same principal (subject, kind, agent name and scopes): a renewal extends
   * a connection, it never changes who is on it. Throws PERMISSION_DENIED otherwise.
   */
  renew(channel: Watched, fresh: VerifiedToken): void {
    const t = this.live.get(channel);
    if (!t) throw new TetherError('FAILED_PRECONDITION', 'this connection has no token to renew (authentication is off)');
    if (!samePrincipal(t.token, fresh)) {
      throw new TetherError(
        'PERMISSION_DENIED',
        'a renewal token must be for the same principal as the connection (same sub, kind, agent and scopes)',
        { reason: 'wrong_principal' },
      );
    }
    clearTimeout(t.timer);
    t.token = fresh;
    this.arm(channel, t);
    this.log.debug({ remote: channel.remote, sub: fresh.principal.sub, expiresAt: fresh.expiresAt.toISOString() }, 'token renewed');
  }

  /**
   * Closes every live connection admitted with the token `jti` (a browser sign-in that
   * ended: signed out, expired, revoked) with UNAUTHENTICATED, saying `why`.
   */
  closeJti(jti: string, why: string): void {
    for (const [channel, t] of this.live) {
      if (t.token.jti !== jti) continue;
      this.log.info({ remote: channel.remote, sub: t.token.principal.sub, why }, 'browser sign-in ended; closing its connection');
      channel.close('UNAUTHENTICATED', `your sign-in ended: ${why}`);
    }
  }

  /** Stops watching revocations and every expiry timer (connections are closed by their owner). */
  dispose(): void {
    this.stopWatching?.();
    for (const t of this.live.values()) clearTimeout(t.timer);
    this.live.clear();
  }

  private arm(channel: Watched, t: Tracked): void {
    const due = t.token.expiresAt.getTime() + this.opts.skewMs;
    const wait = due - (this.opts.now ?? Date.now)();
    if (wait > MAX_TIMER_MS) {
      t.timer = setTimeout(() => this.arm(channel, t), MAX_TIMER_MS);
      return;
    }
    t.timer = setTimeout(
      () => {
        // Judged by the token clock, not the timer: a timer that fires early (or a clock that moved) re-arms.
        if (due > (this.opts.now ?? Date.now)()) return this.arm(channel, t);
        this.log.info({ remote: channel.remote, sub: t.token.principal.sub, jti: t.token.jti }, 'token expired; closing its connection');
        channel.close('UNAUTHENTICATED', 'token expired (renew it with auth.renew before it expires, or reconnect with a fresh one)');
      },
      Math.max(0, wait),
    );
    t.timer.unref();
  }

  private sweepRevoked(): void {
    const list = this.opts.revocations;
    if (!list) return;
    for (const [channel, t] of this.live) {
      const r = list.match({ sub: t.token.principal.sub, jti: t.token.jti, issuedAt: t.token.issuedAt });
      if (!r) continue;
      this.log.warn(
        { remote: channel.remote, sub: t.token.principal.sub, jti: t.token.jti, by: r.jti ? 'jti' : 'sub' },
        'token revoked; closing its connection',
      );
      channel.close('PERMISSION_DENIED', 'token revoked');
    }
  }
}

/** Whether two tokens grant the same principal. */
function samePrincipal(a: VerifiedToken, b: VerifiedToken): boolean {
  const p = a.principal;
  const q = b.principal;
  return (
    a.kind === b.kind &&
    p.sub === q.sub &&
    p.agentName === q.agentName &&
    p.canCreate === q.canCreate &&
    p.canControl === q.canControl &&
    p.canAdmin === q.canAdmin &&
    JSON.stringify(p.agents ?? null) === JSON.stringify(q.agents ?? null)
  );
}
