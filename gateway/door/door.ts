import { authError, authReason } from '../../core/auth/auth-error.js';
import { bearerToken } from '../../core/auth/bearer.js';
import type { LoginDesk } from '../../core/auth/login-codes.js';
import { TicketBook, type TicketOptions } from '../../core/auth/tickets.js';
import type { TokenVerifier, VerifiedToken } from '../../core/auth/verify.js';
import { asTetherError, TetherError } from '../../core/errors.js';
import { scrubUrl, silentLogger, type Logger } from '../../core/logging.js';
import { addressOf, type AuthFailureLimiter, type Reservation } from './door-limits.js';
import { ANONYMOUS, type Principal } from './principal.js';
import type { RevocationList } from './revocations.js';

/**
 * Counts a refused credential with `count` (the gateway's metrics: `tether_auth_failures_total`
 * by reason) and logs it (warn, `event: "auth.failed"`, with its reason and code, never the
 * credential). Returns the error, to throw. No tally lives in this module: the count belongs to
 * the gateway whose door refused, built by the composition root.
 */
export function noteAuthFailure(log: Logger, err: TetherError, fields: Record<string, unknown> = {}, count?: (reason: string) => void): TetherError {
  const reason = authReason(err);
  count?.(reason);
  log.warn({ event: 'auth.failed', ...fields, reason, code: err.code }, `refused: ${err.message}`);
  return err;
}

/** Options of {@link Door}. */
export interface DoorOptions {
  /** Verifies bearer tokens; 'off' lets every connection in as ANONYMOUS (trusted local use only). */
  verifier: TokenVerifier | 'off';
  /** Origins browsers may connect from, as scheme://host[:port] (more via allowOrigin()). */
  allowOrigins?: string[];
  tickets?: TicketOptions;
  /** Trades web sign-in codes for client tokens (POST /v1/login); absent: web sign-in is off. */
  login?: LoginDesk;
  logger?: Logger;
  /** Called with the reason of every refusal: the gateway's metrics count them. */
  onAuthFailure?: (reason: string) => void;
  /** Refused credentials per remote address (threat A17); absent: no limit. */
  failures?: AuthFailureLimiter;
  /** Revoked tokens (`tether revoke`), refused like bad ones. */
  revocations?: RevocationList;
}

/** What the door decided for one connection. */
export interface Admission {
  principal: Principal;
  /** The bearer token that got it in, or that a ticket was issued for (absent with authentication off). */
  token?: VerifiedToken;
}

/** What a listener knows about a connection attempt, transport-blind. */
export interface DoorRequest {
  /** 'ws', 'grpc' or 'http' (the ticket endpoint). */
  transport: string;
  remote: string;
  /** The Authorization header or metadata value, as received. */
  authorization?: string;
  /** The Origin header (browsers always send one; other clients usually none). */
  origin?: string;
  /** A one-time ticket from the WebSocket URL's query. */
  ticket?: string;
  /** The request path, for logs (query scrubbed of tickets before it is logged). */
  path?: string;
}

/**
 * Authentication at the door, before any gateway state exists for a connection: checks the
 * Origin against the allow list (even with authentication off: a page elsewhere must never
 * drive a local gateway), then a one-time ticket or the bearer token, and resolves with the
 * principal routing will use. Cookies are never looked at. Every refusal is counted through
 * `onAuthFailure` and logged (warn, `event: "auth.failed"`) with its reason, never with the
 * token or ticket.
 */
export class Door {
  readonly tickets: TicketBook;
  private readonly origins = new Set<string>();
  private readonly log: Logger;

  constructor(private readonly opts: DoorOptions) {
    this.log = opts.logger ?? silentLogger;
    this.tickets = new TicketBook(opts.tickets);
    for (const o of opts.allowOrigins ?? []) this.allowOrigin(o);
  }

  /** Whether tokens are checked (false: --auth off). */
  get authEnabled(): boolean {
    return this.opts.verifier !== 'off';
  }

  /** Whether the authentication policy is in place: a token verifier, or authentication deliberately off (readiness). */
  get policyLoaded(): boolean {
    return this.opts.verifier === 'off' || typeof this.opts.verifier?.verify === 'function';
  }

  /** Adds an allowed Origin (scheme://host[:port], no path). Throws INVALID_ARGUMENT for anything else. */
  allowOrigin(origin: string): void {
    const normal = normalizeOrigin(origin);
    if (!normal || normal === 'null' || new URL(origin).pathname.replace(/\/$/, '') !== '') {
      throw new TetherError('INVALID_ARGUMENT', `--allow-origin must be an origin like https://app.example.com[:port] (no path), got "${origin}"`);
    }
    this.origins.add(normal);
  }

  /** The allowed origins, normalised. */
  get allowedOrigins(): string[] {
    return [...this.origins];
  }

  /** The clock tokens are judged by, epoch ms. */
  nowMs(): number {
    return this.opts.verifier === 'off' ? Date.now() : this.opts.verifier.nowMs();
  }

  /** The clock skew allowed past a token's exp (0 with authentication off). */
  get clockToleranceMs(): number {
    return this.opts.verifier === 'off' ? 0 : this.opts.verifier.clockToleranceMs;
  }

  /**
   * Decides one connection: resolves with its principal (and the token), or rejects with the
   * refusal (already counted and logged). An address that spent its failures is refused with
   * RESOURCE_EXHAUSTED before its credential is looked at.
   */
  async admit(req: DoorRequest): Promise<Admission> {
    let reserved: Reservation | undefined;
    try {
      this.checkOrigin(req.origin);
      if (this.opts.verifier === 'off') return { principal: ANONYMOUS };
      reserved = this.opts.failures?.take(addressOf(req.remote));
      if (req.ticket !== undefined) {
        if (req.authorization !== undefined) throw authError('UNAUTHENTICATED', 'malformed', 'send a token or a ticket, not both');
        const { principal, token } = await this.tickets.redeemWithToken(req.ticket, normalizeOrigin(req.origin ?? ''));
        if (token) this.checkRevoked(token);
        reserved?.refund();
        this.log.debug({ transport: req.transport, remote: req.remote, principal: principal.sub, via: 'ticket' }, 'authenticated');
        return { principal, token };
      }
      const verified = await this.opts.verifier.verify(bearerToken(req.authorization));
      this.checkRevoked(verified);
      reserved?.refund();
      this.log.debug({ transport: req.transport, remote: req.remote, principal: verified.principal.sub, kind: verified.kind }, 'authenticated');
      return { principal: verified.principal, token: verified };
    } catch (err) {
      throw this.refused(req, err, reserved);
    }
  }

  /**
   * POST /v1/ticket: a one-time ticket for the client token in `req.authorization`, bound
   * to its principal and to `req.origin`. Refusals are counted and logged like admit()'s.
   */
  async issueTicket(req: DoorRequest): Promise<{ ticket: string; expires_in: number }> {
    let reserved: Reservation | undefined;
    try {
      this.checkOrigin(req.origin);
      if (this.opts.verifier === 'off') throw new TetherError('FAILED_PRECONDITION', 'authentication is off on this gateway: connect without a ticket');
      reserved = this.opts.failures?.take(addressOf(req.remote));
      const verified = await this.opts.verifier.verify(bearerToken(req.authorization));
      if (verified.kind !== 'client') throw authError('PERMISSION_DENIED', 'wrong_type', 'tickets are for clients: this is an agent token');
      this.checkRevoked(verified);
      reserved?.refund();
      const { ticket, expiresIn } = await this.tickets.issue(verified.principal, normalizeOrigin(req.origin ?? ''), verified);
      return { ticket, expires_in: expiresIn };
    } catch (err) {
      throw this.refused(req, err, reserved);
    }
  }

  /**
   * POST /v1/login: trades a single-use sign-in code for a client token (the web page keeps
   * it for the tab). Refusals are counted and logged like admit()'s; FAILED_PRECONDITION when
   * this gateway has no sign-in desk (authentication off, or no key that can sign).
   */
  async signIn(req: DoorRequest, code: string): Promise<{ token: string; expires_in: number; principal: string }> {
    let reserved: Reservation | undefined;
    try {
      this.checkOrigin(req.origin);
      if (this.opts.verifier === 'off') throw new TetherError('FAILED_PRECONDITION', 'authentication is off on this gateway: the page needs no sign-in');
      if (!this.opts.login) throw new TetherError('FAILED_PRECONDITION', 'web sign-in is off on this gateway (it has no key that can sign tokens)');
      reserved = this.opts.failures?.take(addressOf(req.remote)); // sign-in codes are guessable secrets too
      const r = await this.opts.login.redeem(code);
      reserved?.refund();
      this.log.info({ transport: req.transport, remote: req.remote, principal: r.sub, event: 'auth.sign_in' }, 'signed in with a sign-in link');
      return { token: r.token, expires_in: r.expiresIn, principal: r.sub };
    } catch (err) {
      throw this.refused(req, err, reserved);
    }
  }

  /** Whether a request with this Origin header may proceed (no Origin: yes, the token decides). */
  originAllowed(origin: string | undefined): boolean {
    if (origin === undefined) return true;
    const normal = normalizeOrigin(origin);
    return normal !== undefined && this.origins.has(normal);
  }

  private checkRevoked(token: VerifiedToken): void {
    if (this.opts.revocations?.match({ sub: token.principal.sub, jti: token.jti, issuedAt: token.issuedAt })) {
      throw authError('PERMISSION_DENIED', 'revoked', 'token revoked (tether revoke)');
    }
  }

  private checkOrigin(origin: string | undefined): void {
    if (origin !== undefined && !this.originAllowed(origin)) {
      throw authError('PERMISSION_DENIED', 'origin', `origin ${JSON.stringify(origin.slice(0, 100))} is not allowed (the gateway's --allow-origin adds one)`);
    }
  }

  private refused(req: DoorRequest, err: unknown, reserved: Reservation | undefined): TetherError {
    const path = req.path === undefined ? undefined : scrubUrl(req.path);
    const e = asTetherError(err, 'UNAUTHENTICATED');
    const fields = { transport: req.transport, remote: req.remote, path };
    if (authReason(e) === 'rate_limited') {
      // Counted, but logged at debug: a flood must not turn into a flood of log lines.
      this.opts.onAuthFailure?.('rate_limited');
      this.log.debug({ event: 'auth.failed', ...fields, reason: 'rate_limited', code: e.code }, `refused: ${e.message}`);
      return e;
    }
    if (reserved?.exhausted) {
      this.log.warn({ event: 'auth.rate_limited', ...fields }, 'this address spent its failed authentications: it is refused unread until they refill');
    }
    return noteAuthFailure(this.log, e, fields, this.opts.onAuthFailure);
  }
}

/** scheme://host[:port] in canonical form (lower case, default port dropped); 'null' stays 'null'; undefined if not an http(s) origin. */
function normalizeOrigin(origin: string): string | undefined {
  if (origin === 'null') return 'null';
  try {
    const u = new URL(origin);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : undefined;
  } catch {
    return undefined;
  }
}
