import { createSecretKey, randomBytes } from 'node:crypto';
import { decodeJwt, jwtVerify } from 'jose';
import { TetherError } from '../errors.js';
import { authError } from './auth-error.js';
import { explainJoseError } from './jose-errors.js';
import type { TokenKey } from './keys.js';
import { mintToken } from './mint.js';
import type { Principal } from './principal.js';
import type { VerifiedToken } from './verify.js';
import { claimedKind } from './compact-jws.js';
import { TOKEN_AUDIENCE, TOKEN_ISSUER, TOKEN_TYP } from './token-kinds.js';

/** Options of {@link TicketBook}. */
export interface TicketOptions {
  /** Lifetime of a ticket, seconds (default and maximum 60). */
  ttlSeconds?: number;
  /** Tickets issued and not yet used or expired, at most (default 10,000); beyond: RESOURCE_EXHAUSTED. */
  maxOutstanding?: number;
  /** The clock (tests). */
  now?: () => Date;
}

/** Longest ticket lifetime (threats.md part 3: ≤ 60 s). */
export const MAX_TICKET_TTL_SECONDS = 60;
/** Tickets issued and not yet used or expired, at most, unless told otherwise. */
export const DEFAULT_MAX_OUTSTANDING_TICKETS = 10_000;

interface Outstanding {
  principal: Principal;
  /** The issuing token (its expiry and revocation follow the ticket's connection). */
  token?: VerifiedToken;
  origin: string | undefined;
  expiresAtMs: number;
}

/**
 * One-time WebSocket tickets for browsers, which cannot set an Authorization header: a
 * client with a valid token asks for one (POST /v1/ticket) and opens the WebSocket with
 * `?ticket=…` within 60 s. A ticket is a JWT (typ tether-ticket+jwt) signed with a secret
 * that lives only in this process, bound to the principal and the Origin it was issued to,
 * and good for exactly one redemption (the first wins, concurrent ones included). Its
 * principal is the issuing token's, kept here: the ticket carries no scopes of its own.
 */
export class TicketBook {
  private readonly key: TokenKey;
  private readonly outstanding = new Map<string, Outstanding>();
  private readonly ttl: number;
  private readonly max: number;
  private readonly now: () => Date;

  constructor(opts: TicketOptions = {}) {
    const secret = createSecretKey(randomBytes(32));
    this.key = { kid: `ticket-${randomBytes(4).toString('hex')}`, alg: 'HS256', verifyKey: secret, signKey: secret };
    this.ttl = Math.min(opts.ttlSeconds ?? MAX_TICKET_TTL_SECONDS, MAX_TICKET_TTL_SECONDS);
    this.max = opts.maxOutstanding ?? DEFAULT_MAX_OUTSTANDING_TICKETS;
    this.now = opts.now ?? (() => new Date());
  }

  /** Tickets issued and not yet redeemed (expired ones are dropped when the book fills). */
  get size(): number {
    return this.outstanding.size;
  }

  /**
   * Issues a ticket for a client principal, bound to `origin` (the request's Origin, if any).
   * `token`, the issuing token, comes back from {@link redeemWithToken}.
   */
  async issue(principal: Principal, origin: string | undefined, token?: VerifiedToken): Promise<{ ticket: string; expiresIn: number }> {
    if (principal.kind !== 'client') throw authError('PERMISSION_DENIED', 'wrong_type', 'tickets are for clients: use a client token');
    const now = this.now();
    if (this.outstanding.size >= this.max) this.sweep(now.getTime());
    if (this.outstanding.size >= this.max)
      throw new TetherError('RESOURCE_EXHAUSTED', 'too many tickets outstanding; try again in a minute');
    const ticket = await mintToken({
      key: this.key,
      kind: 'ticket',
      sub: principal.sub,
      ttlSeconds: this.ttl,
      now,
      claims: origin ? { origin } : {},
    });
    const jti = String(decodeJwt(ticket).jti);
    this.outstanding.set(jti, { principal, token, origin, expiresAtMs: now.getTime() + this.ttl * 1000 });
    return { ticket, expiresIn: this.ttl };
  }

  /**
   * Redeems a ticket presented from `origin`: resolves with its principal, once. A second use,
   * an expired or forged ticket, or another origin is refused (UNAUTHENTICATED, or
   * PERMISSION_DENIED for the origin); a refused ticket is used up all the same.
   */
  async redeem(ticket: string, origin: string | undefined): Promise<Principal> {
    return (await this.redeemWithToken(ticket, origin)).principal;
  }

  /** Like {@link redeem}, also handing back the issuing token given to issue(). */
  async redeemWithToken(ticket: string, origin: string | undefined): Promise<{ principal: Principal; token?: VerifiedToken }> {
    if (claimedKind(ticket, 'ticket') !== 'ticket')
      throw authError(
        'UNAUTHENTICATED',
        'wrong_type',
        'not a ticket (tickets come from POST /v1/ticket; tokens go in the Authorization header)',
      );
    let jti: string;
    try {
      const { payload } = await jwtVerify(ticket, this.key.verifyKey, {
        algorithms: ['HS256'],
        issuer: TOKEN_ISSUER,
        audience: TOKEN_AUDIENCE,
        typ: TOKEN_TYP.ticket,
        requiredClaims: ['exp', 'iat', 'jti', 'sub'],
        currentDate: this.now(),
      });
      jti = String(payload.jti);
    } catch (err) {
      throw explainJoseError(err, { issuer: TOKEN_ISSUER, audience: TOKEN_AUDIENCE });
    }
    const entry = this.outstanding.get(jti);
    this.outstanding.delete(jti); // get and delete in one synchronous step: the first redemption wins
    if (!entry || entry.expiresAtMs <= this.now().getTime()) {
      throw authError(
        'UNAUTHENTICATED',
        'ticket_used',
        'ticket already used or expired (tickets are single-use; get a new one from POST /v1/ticket)',
      );
    }
    if (entry.origin !== origin) throw authError('PERMISSION_DENIED', 'ticket_origin', 'ticket was issued to another origin');
    return { principal: entry.principal, token: entry.token };
  }

  private sweep(nowMs: number): void {
    for (const [jti, e] of this.outstanding) if (e.expiresAtMs <= nowMs) this.outstanding.delete(jti);
  }
}
