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
import type { BrowserSessions } from './browser-sessions.js';
import { WebSignIn, type WebSignInOptions } from './web-sign-in.js';

/**
 * Counts a refused credential with `count` (the gateway's metrics: `tether_auth_failures_total`
 * by reason) and logs it (warn, `event: "auth.failed"`, with its reason and code, never the
 * credential). Returns the error, to throw. No tally lives in this module: the count belongs to
 * the gateway whose door refused, built by the composition root.
 */
export function noteAuthFailure(
  log: Logger,
  err: TetherError,
  fields: Record<string, unknown> = {},
  count?: (reason: string) => void,
): TetherError {
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
  /** Browser sign-ins (the cookie that buys tickets); absent: tickets only for bearer tokens. */
  browser?: BrowserSessions;
  /** Sign-in with an identity provider and `tether login` (web-sign-in.ts). */
  web?: Omit<WebSignInOptions, 'browser' | 'guard' | 'login' | 'logger'>;
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
  /** The browser sign-in cookie's value (HTTP endpoints only; never a WebSocket's). */
  cookie?: string;
}

/**
 * Authentication at the door, before any gateway state exists for a connection: checks the
 * Origin against the allow list (even with authentication off: a page elsewhere must never
 * drive a local gateway), then a one-time ticket or the bearer token, and resolves with the
 * principal routing will use. A browser sign-in cookie is looked at only where it buys a
 * ticket (POST /v1/ticket, Origin required) and by the sign-in endpoints. Every refusal is counted through
 * `onAuthFailure` and logged (warn, `event: "auth.failed"`) with its reason, never with the
 * token or ticket.
 */
export class Door {
  readonly tickets: TicketBook;
  /** Browser sign-ins (absent: none on this gateway). */
  readonly browser: BrowserSessions | undefined;
  /** The browser's sign-in endpoints: link, identity provider, sign-out, `tether login`. */
  readonly web: WebSignIn;
  private readonly origins = new Set<string>();
  private readonly log: Logger;

  constructor(private readonly opts: DoorOptions) {
    this.log = opts.logger ?? silentLogger;
    this.tickets = new TicketBook(opts.tickets);
    for (const o of opts.allowOrigins ?? []) this.allowOrigin(o);
    this.browser = opts.verifier === 'off' ? undefined : opts.browser;
    this.web = new WebSignIn({
      ...opts.web,
      login: opts.login,
      browser: this.browser,
      logger: this.log,
      guard: (req, work) => this.guard(req, work),
    });
    // A revocation ends the browser sign-ins it covers at once, not only at their next ticket.
    opts.revocations?.onChange(() => this.browser?.endWhere((s) => this.isRevoked(s.token), 'revoked (tether revoke)'));
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
      throw new TetherError(
        'INVALID_ARGUMENT',
        `--allow-origin must be an origin like https://app.example.com[:port] (no path), got "${origin}"`,
      );
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
      this.log.debug(
        { transport: req.transport, remote: req.remote, principal: verified.principal.sub, kind: verified.kind },
        'authenticated',
      );
      return { principal: verified.principal, token: verified };
    } catch (err) {
      throw this.refused(req, err, reserved);
    }
  }

  /**
   * POST /v1/ticket: a one-time ticket for the client token in `req.authorization`, or, with
   * no Authorization, for the browser sign-in in `req.cookie` (then an allowed Origin is
   * required: the cookie serves the gateway's page only). Bound to its principal and to
   * `req.origin`. Refusals are counted and logged like admit()'s.
   */
  async issueTicket(req: DoorRequest): Promise<{ ticket: string; expires_in: number }> {
    return this.guard(req, async () => {
      const verified = await this.verifiedOf(req);
      const { ticket, expiresIn } = await this.tickets.issue(verified.principal, normalizeOrigin(req.origin ?? ''), verified);
      return { ticket, expires_in: expiresIn };
    });
  }

  /**
   * Who makes an HTTP request of the gateway's own API (the notification settings and answers):
   * a client token in `req.authorization`, or without one the browser sign-in in `req.cookie`
   * (an allowed Origin required, as for tickets: the cookie serves the gateway's page only).
   * ANONYMOUS with authentication off. Refusals are counted and logged like admit()'s.
   */
  async principalOf(req: DoorRequest): Promise<Principal> {
    if (this.opts.verifier === 'off') {
      this.checkOrigin(req.origin);
      return ANONYMOUS;
    }
    return this.guard(req, async () => this.verifiedOf(req).then((v) => v.principal));
  }

  /** The token of a request: its bearer token, or without one its browser sign-in. */
  private async verifiedOf(req: DoorRequest): Promise<VerifiedToken> {
    return req.authorization === undefined && this.browser ? this.browserToken(req) : this.bearer(req);
  }

  /**
   * Runs one sign-in or ticket request at the door: the Origin checked, refused with
   * FAILED_PRECONDITION when authentication is off, the address's failure budget taken
   * (refunded when `work` succeeds); a refusal is counted and logged like admit()'s.
   */
  async guard<T>(req: DoorRequest, work: () => Promise<T>): Promise<T> {
    let reserved: Reservation | undefined;
    try {
      this.checkOrigin(req.origin);
      if (this.opts.verifier === 'off')
        throw new TetherError('FAILED_PRECONDITION', 'authentication is off on this gateway: connect without a ticket or sign-in');
      reserved = this.opts.failures?.take(addressOf(req.remote));
      const result = await work();
      reserved?.refund();
      return result;
    } catch (err) {
      throw this.refused(req, err, reserved);
    }
  }

  private async bearer(req: DoorRequest): Promise<VerifiedToken> {
    if (this.opts.verifier === 'off') throw new TetherError('FAILED_PRECONDITION', 'authentication is off');
    const verified = await this.opts.verifier.verify(bearerToken(req.authorization));
    if (verified.kind !== 'client') throw authError('PERMISSION_DENIED', 'wrong_type', 'tickets are for clients: this is an agent token');
    this.checkRevoked(verified);
    return verified;
  }

  /** The token of the browser sign-in a cookie holds; a revoked one is ended here. */
  private browserToken(req: DoorRequest): VerifiedToken {
    const s = this.browser!.use(req.cookie);
    if (req.origin === undefined)
      throw authError(
        'PERMISSION_DENIED',
        'origin',
        "a browser sign-in buys tickets only for the gateway's page (the request has no Origin)",
      );
    if (this.isRevoked(s.token)) {
      this.browser!.end(req.cookie, 'revoked (tether revoke)');
      throw authError('UNAUTHENTICATED', 'signed_out', 'your sign-in was revoked on this gateway (tether revoke): sign in again');
    }
    return s.token;
  }

  /**
   * POST /v1/login: trades a single-use sign-in code for a client token (the web page keeps
   * it for the tab) and, where browser sign-ins are on and `withCookie` (the browser keeps
   * Secure cookies), a browser sign-in whose cookie every tab shares.
   * Refusals are counted and logged like admit()'s; FAILED_PRECONDITION when
   * this gateway has no sign-in desk (authentication off, or no key that can sign).
   */
  async signIn(
    req: DoorRequest,
    code: string,
    withCookie = false,
  ): Promise<{ body: { token: string; expires_in: number; principal: string }; cookie?: string }> {
    return this.guard(req, async () => {
      if (!this.opts.login)
        throw new TetherError('FAILED_PRECONDITION', 'web sign-in is off on this gateway (it has no key that can sign tokens)');
      const r = await this.opts.login.redeem(code);
      this.log.info(
        { transport: req.transport, remote: req.remote, principal: r.sub, event: 'auth.sign_in' },
        'signed in with a sign-in link',
      );
      const cookie = withCookie ? this.browser?.create({ sub: r.sub, scopes: r.scopes, via: 'link' }) : undefined;
      return { body: { token: r.token, expires_in: r.expiresIn, principal: r.sub }, cookie };
    });
  }

  /** Whether a request with this Origin header may proceed (no Origin: yes, the token decides). */
  originAllowed(origin: string | undefined): boolean {
    if (origin === undefined) return true;
    const normal = normalizeOrigin(origin);
    return normal !== undefined && this.origins.has(normal);
  }

  private isRevoked(token: VerifiedToken): boolean {
    return this.opts.revocations?.match({ sub: token.principal.sub, jti: token.jti, issuedAt: token.issuedAt }) !== undefined;
  }

  private checkRevoked(token: VerifiedToken): void {
    if (this.isRevoked(token)) {
      throw authError('PERMISSION_DENIED', 'revoked', 'token revoked (tether revoke)');
    }
  }

  private checkOrigin(origin: string | undefined): void {
    if (origin !== undefined && !this.originAllowed(origin)) {
      throw authError(
        'PERMISSION_DENIED',
        'origin',
        `origin ${JSON.stringify(origin.slice(0, 100))} is not allowed (the gateway's --allow-origin adds one)`,
      );
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
      this.log.warn(
        { event: 'auth.rate_limited', ...fields },
        'this address spent its failed authentications: it is refused unread until they refill',
      );
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
