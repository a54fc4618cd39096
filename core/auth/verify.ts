import { decodeProtectedHeader, jwtVerify, type JWSHeaderParameters, type FlattenedJWSInput, type JWTPayload } from 'jose';
import type { KeyObject } from 'node:crypto';
import { TetherError } from '../errors.js';
import { authError } from './auth-error.js';
import { COMPACT_JWS } from './compact-jws.js';
import { algName, explainJoseError } from './jose-errors.js';
import type { RemoteKeys } from './jwks.js';
import { ASYMMETRIC_ALGS, type TokenAlg, type TokenKey } from './keys.js';
import { DISPLAY_NAME, type Principal } from './principal.js';
import { principalFromScopes } from './scopes.js';
import { kindOfTyp, TOKEN_AUDIENCE, TOKEN_ISSUER } from './token-kinds.js';

/** Longest token looked at; anything longer is refused before it is parsed. */
export const MAX_TOKEN_CHARS = 8 * 1024;

/** Default clock skew allowed on exp, nbf and iat, in seconds. */
export const DEFAULT_CLOCK_TOLERANCE_SEC = 30;

/** Options of {@link TokenVerifier}. At least one of keys and jwks is needed. */
export interface VerifierOptions {
  /** Local keys (a key file, the state folder's key), found by the token's kid. */
  keys?: TokenKey[];
  /** A remote key set (--jwks-url), for kids not among the local keys. */
  jwks?: RemoteKeys;
  /** Algorithms accepted from the remote key set (default EdDSA, ES256, RS256; never HS256). */
  jwksAlgs?: TokenAlg[];
  /** Expected `iss` (default 'tether'). */
  issuer?: string;
  /** Expected `aud` (default 'tether-gateway'). */
  audience?: string;
  /** Clock skew allowed, seconds (default 30). */
  clockToleranceSec?: number;
  /** Refuse tokens issued longer ago than this, seconds (default: no limit beyond exp). */
  maxTokenAgeSec?: number;
  /** The clock (tests). */
  now?: () => Date;
}

/** A token that passed every check. */
export interface VerifiedToken {
  kind: 'agent' | 'client';
  principal: Principal;
  jti: string;
  /** `iat` (revocation by subject refuses tokens issued up to the revocation). */
  issuedAt: Date;
  expiresAt: Date;
}

/**
 * Verifies agent and client tokens with jose, strictly: algorithms pinned per key (the
 * header's `alg` must be the key's own; `none` and HS256-with-a-public-key never pass), a kid
 * is only ever looked up among our own keys (or in our configured JWKS), key material in the
 * header (`jwk`, `jku`, `x5u`, `x5c`) is ignored, `iss`, `aud` and `typ` are checked, and
 * `exp`, `iat`, `jti`, `sub` are required, with a clock skew of 30 s by default on exp, nbf
 * and iat. Each failure is a TetherError (UNAUTHENTICATED, or UNAVAILABLE when a JWKS cannot
 * be fetched) whose message says what was wrong and never contains the token.
 */
export class TokenVerifier {
  private readonly local = new Map<string, TokenKey>();
  private readonly jwks: RemoteKeys | undefined;
  private readonly jwksAlgs: readonly TokenAlg[];
  private readonly algorithms: string[];
  private readonly issuer: string;
  private readonly audience: string;
  private readonly tolerance: number;
  private readonly now: () => Date;

  constructor(private readonly opts: VerifierOptions) {
    for (const k of opts.keys ?? []) this.local.set(k.kid, k);
    this.jwks = opts.jwks;
    if (!this.local.size && !this.jwks) throw new TetherError('INVALID_ARGUMENT', 'a token verifier needs a key or a JWKS URL');
    this.jwksAlgs = (opts.jwksAlgs ?? ASYMMETRIC_ALGS).filter((a) => a !== 'HS256');
    this.algorithms = [...new Set([...[...this.local.values()].map((k) => k.alg), ...(this.jwks ? this.jwksAlgs : [])])];
    this.issuer = opts.issuer ?? TOKEN_ISSUER;
    this.audience = opts.audience ?? TOKEN_AUDIENCE;
    this.tolerance = opts.clockToleranceSec ?? DEFAULT_CLOCK_TOLERANCE_SEC;
    this.now = opts.now ?? (() => new Date());
  }

  /** The clock skew allowed on exp, in ms: a live connection is closed this long after its token's exp. */
  get clockToleranceMs(): number {
    return this.tolerance * 1000;
  }

  /** The verifier's clock, in epoch ms (live connections' expiry is judged by it too). */
  nowMs(): number {
    return this.now().getTime();
  }

  /** Verifies one token (the part after "Bearer "); resolves with what it grants. */
  async verify(token: string): Promise<VerifiedToken> {
    if (token.length > MAX_TOKEN_CHARS)
      throw authError('UNAUTHENTICATED', 'too_large', `token too large (over ${MAX_TOKEN_CHARS} characters)`);
    if (!COMPACT_JWS.test(token)) throw authError('UNAUTHENTICATED', 'malformed', 'malformed token (not a JWT)');
    let header: JWSHeaderParameters;
    try {
      header = decodeProtectedHeader(token) as JWSHeaderParameters;
    } catch {
      throw authError('UNAUTHENTICATED', 'malformed', 'malformed token (its header is not readable)');
    }
    const now = this.now();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, (h, t) => this.keyFor(h, t), {
        algorithms: this.algorithms,
        issuer: this.issuer,
        audience: this.audience,
        requiredClaims: ['exp', 'iat', 'jti', 'sub'],
        clockTolerance: this.tolerance,
        maxTokenAge: this.opts.maxTokenAgeSec,
        currentDate: now,
      }));
    } catch (err) {
      throw explainJoseError(err, { issuer: this.issuer, audience: this.audience, alg: header.alg });
    }
    return this.grant(header, payload, now);
  }

  /** The key for a token's header: only ever one of ours, and only for its own algorithm. */
  private async keyFor(header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<CryptoKey | KeyObject> {
    const { kid, alg } = header;
    if (kid !== undefined && typeof kid !== 'string')
      throw authError('UNAUTHENTICATED', 'malformed', 'malformed token ("kid" is not a string)');
    const local = kid !== undefined ? this.local.get(kid) : this.local.size === 1 && !this.jwks ? [...this.local.values()][0] : undefined;
    if (local) {
      if (alg !== local.alg)
        throw authError('UNAUTHENTICATED', 'bad_alg', `algorithm ${algName(alg)} is not accepted for this key (it is ${local.alg})`);
      return local.verifyKey;
    }
    if (this.jwks) {
      if (!this.jwksAlgs.includes(alg as TokenAlg))
        throw authError('UNAUTHENTICATED', 'bad_alg', `algorithm ${algName(alg)} is not accepted`);
      return this.jwks(header, token);
    }
    throw authError('UNAUTHENTICATED', 'unknown_key', 'token signed by a key this gateway does not know (unknown kid)');
  }

  private grant(header: JWSHeaderParameters, payload: JWTPayload, now: Date): VerifiedToken {
    const kind = kindOfTyp(header.typ);
    if (kind === 'ticket')
      throw authError(
        'UNAUTHENTICATED',
        'wrong_type',
        'this is a browser ticket, not a bearer token: use it once as ?ticket= on the WebSocket URL',
      );
    if (kind === 'login')
      throw authError('UNAUTHENTICATED', 'wrong_type', 'this is a sign-in code, not a bearer token: open the sign-in link in a browser');
    if (!kind) throw authError('UNAUTHENTICATED', 'wrong_type', 'wrong token type (typ must be tether-agent+jwt or tether-client+jwt)');
    const { sub, jti, iat, exp } = payload;
    if (typeof sub !== 'string' || sub.length === 0 || sub.length > 256)
      throw authError('UNAUTHENTICATED', 'bad_claim', 'token "sub" claim must be a string of 1-256 characters');
    if (typeof jti !== 'string' || jti.length === 0 || jti.length > 256)
      throw authError('UNAUTHENTICATED', 'bad_claim', 'token "jti" claim must be a string of 1-256 characters');
    // jose checks iat against the clock only with maxTokenAge; a token from the future is refused either way.
    if (typeof iat === 'number' && iat > now.getTime() / 1000 + this.tolerance)
      throw authError('UNAUTHENTICATED', 'not_yet_valid', 'token issued in the future (check the clocks)');
    const expiresAt = new Date((exp as number) * 1000);
    const issuedAt = new Date((iat as number) * 1000);
    if (kind === 'agent') {
      const agent = payload.agent;
      if (typeof agent !== 'string' || !/^[A-Za-z0-9._-]{1,128}$/.test(agent))
        throw authError('UNAUTHENTICATED', 'bad_claim', 'agent token names no valid agent ("agent" claim)');
      return {
        kind,
        jti,
        issuedAt,
        expiresAt,
        principal: { sub, kind: 'agent', agentName: agent, canCreate: false, canControl: false, canAdmin: false },
      };
    }
    const scope = payload.scope;
    if (scope !== undefined && typeof scope !== 'string')
      throw authError('UNAUTHENTICATED', 'bad_scope', 'token "scope" claim must be a space-separated string');
    // A display name is for people to read; one that is not a short printable string is left out, not refused.
    const name = typeof payload.name === 'string' && DISPLAY_NAME.test(payload.name) ? { name: payload.name } : {};
    try {
      const principal = principalFromScopes(sub, scope ? scope.split(' ').filter(Boolean) : []);
      return { kind, jti, issuedAt, expiresAt, principal: { ...principal, ...name } };
    } catch (err) {
      throw authError('UNAUTHENTICATED', 'bad_scope', `token has a bad scope: ${(err as Error).message}`);
    }
  }
}
