import { jwtVerify } from 'jose';
import { TetherError } from '../errors.js';
import { authError } from './auth-error.js';
import { explainJoseError } from './jose-errors.js';
import type { TokenKey } from './keys.js';
import { mintToken } from './mint.js';
import { checkScopes } from './scopes.js';
import { claimedKind } from './compact-jws.js';
import { TOKEN_AUDIENCE, TOKEN_ISSUER, TOKEN_TYP } from './token-kinds.js';

/** How long a sign-in code is good for, by default (a few minutes: it travels in a URL). */
export const LOGIN_CODE_TTL_SECONDS = 5 * 60;
/** Longest lifetime a sign-in code may be given. */
export const MAX_LOGIN_CODE_TTL_SECONDS = 15 * 60;
/** Lifetime of the client token a browser gets for a code (kept for the tab only). */
export const LOGIN_TOKEN_TTL_SECONDS = 12 * 3600;
/** Codes redeemed and not yet expired that the desk remembers, at most; beyond: RESOURCE_EXHAUSTED. */
export const MAX_REMEMBERED_CODES = 10_000;

/** What a sign-in code grants: the client token's subject and scopes. */
export interface LoginGrant {
  sub: string;
  scopes?: string[];
}

/**
 * Mints a single-use sign-in code for the web page: a JWT (typ tether-login+jwt) signed with
 * the gateway's key, valid `ttlSeconds` (default 5 min, at most 15), carrying the sub and
 * scopes of the client token it will be traded for. It is never a bearer token itself.
 */
export async function mintLoginCode(key: TokenKey, grant: LoginGrant, ttlSeconds = LOGIN_CODE_TTL_SECONDS, now?: Date): Promise<string> {
  if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0 || ttlSeconds > MAX_LOGIN_CODE_TTL_SECONDS) {
    throw new TetherError('INVALID_ARGUMENT', `a sign-in code lives 1 s to ${MAX_LOGIN_CODE_TTL_SECONDS / 60} min (it travels in a URL)`);
  }
  const scopes = grant.scopes?.length ? checkScopes(grant.scopes) : [];
  return mintToken({ key, kind: 'login', sub: grant.sub, ttlSeconds, now, claims: scopes.length ? { scope: scopes.join(' ') } : {} });
}

/**
 * Trades sign-in codes for client tokens, each code once (POST /v1/login). Codes are checked
 * against the gateway's own signing key only (a code minted elsewhere never passes); the
 * ids of redeemed codes are remembered until the codes expire, so a second use is refused
 * even while the code is still within its lifetime. The memory lives in this process: a
 * gateway restart forgets which codes were used (they still expire within minutes).
 */
export class LoginDesk {
  private readonly used = new Map<string, number>();
  private readonly now: () => Date;

  constructor(
    private readonly key: TokenKey,
    opts: { now?: () => Date; tokenTtlSeconds?: number } = {},
  ) {
    if (!key.signKey) throw new TetherError('INVALID_ARGUMENT', 'web sign-in needs a key that can sign (the client token is minted here)');
    this.now = opts.now ?? (() => new Date());
    this.tokenTtl = opts.tokenTtlSeconds ?? LOGIN_TOKEN_TTL_SECONDS;
  }

  private readonly tokenTtl: number;

  /**
   * Redeems a code: resolves with a client token for its sub and scopes, once. A second use,
   * an expired, forged or malformed code is refused with UNAUTHENTICATED (reason
   * `login_used` for a second use).
   */
  async redeem(code: string): Promise<{ token: string; expiresIn: number; sub: string; scopes: string[] }> {
    if (claimedKind(code, 'sign-in code') !== 'login')
      throw authError('UNAUTHENTICATED', 'wrong_type', 'not a sign-in code (tether up and tether login-link print them)');
    const now = this.now();
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(code, this.key.verifyKey, {
        algorithms: [this.key.alg],
        issuer: TOKEN_ISSUER,
        audience: TOKEN_AUDIENCE,
        typ: TOKEN_TYP.login,
        requiredClaims: ['exp', 'iat', 'jti', 'sub'],
        currentDate: now,
      }));
    } catch (err) {
      throw explainJoseError(err, { issuer: TOKEN_ISSUER, audience: TOKEN_AUDIENCE });
    }
    const jti = String(payload.jti);
    this.sweep(now.getTime());
    if (this.used.has(jti))
      throw authError('UNAUTHENTICATED', 'login_used', 'this sign-in link was already used (each link works once: ask for a new one)');
    if (this.used.size >= MAX_REMEMBERED_CODES)
      throw new TetherError('RESOURCE_EXHAUSTED', 'too many sign-ins in the last minutes; try again shortly');
    this.used.set(jti, (payload.exp as number) * 1000);
    const sub = String(payload.sub);
    const scope = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [];
    const token = await mintToken({ key: this.key, kind: 'client', sub, scopes: scope, ttlSeconds: this.tokenTtl, now });
    return { token, expiresIn: this.tokenTtl, sub, scopes: scope };
  }

  private sweep(nowMs: number): void {
    for (const [jti, expMs] of this.used) if (expMs <= nowMs) this.used.delete(jti);
  }
}
