import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { TokenKey } from '../../core/auth/keys.js';
import { mintToken } from '../../core/auth/mint.js';
import { TetherError } from '../../core/errors.js';
import type { BrowserIdentity } from './browser-sessions.js';

/** Bounds of the terminal sign-in. */
export const CLI_LOGIN_DEFAULTS = {
  /** A code must be traded within this. */
  codeTtlMs: 60_000,
  /** Codes not yet traded at most; beyond, RESOURCE_EXHAUSTED. */
  maxCodes: 1_000,
  /** Lifetime of the client token `tether login` keeps. */
  tokenTtlSeconds: 7 * 24 * 3600,
};

/** A PKCE S256 challenge: 43 base64url characters. */
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
/** A PKCE verifier (RFC 7636: 43-128 unreserved characters). */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

interface Issued {
  identity: BrowserIdentity;
  challenge: string;
  expiresAtMs: number;
}

/**
 * The terminal's sign-in (`tether login`), PKCE-like: the CLI keeps a random verifier and
 * sends only its SHA-256 (the challenge) through the browser; the signed-in browser asks
 * for a one-time code bound to that challenge and to its identity, and goes to the CLI's
 * loopback listener with it; the CLI trades code + verifier for a client token. A code seen
 * on the way (browser history, another local program) is worthless without the verifier,
 * works once and for a minute.
 */
export class CliLoginDesk {
  private readonly codes = new Map<string, Issued>();

  constructor(
    private readonly key: TokenKey,
    private readonly now: () => number = Date.now,
  ) {
    if (!key.signKey) throw new TetherError('INVALID_ARGUMENT', 'tether login needs a gateway key that can sign (the client token is minted here)');
  }

  /** A one-time code for `identity`, bound to `challenge` (INVALID_ARGUMENT for a malformed one). */
  issue(identity: BrowserIdentity, challenge: string): string {
    if (!CHALLENGE.test(challenge)) throw new TetherError('INVALID_ARGUMENT', 'the code challenge must be 43 base64url characters (SHA-256 of the verifier)');
    const now = this.now();
    for (const [code, i] of this.codes) if (i.expiresAtMs <= now) this.codes.delete(code);
    if (this.codes.size >= CLI_LOGIN_DEFAULTS.maxCodes) throw new TetherError('RESOURCE_EXHAUSTED', 'too many terminal sign-ins in progress; try again in a minute');
    const code = randomBytes(32).toString('base64url');
    this.codes.set(code, { identity, challenge, expiresAtMs: now + CLI_LOGIN_DEFAULTS.codeTtlMs });
    return code;
  }

  /**
   * Trades a code and its verifier for a client token of the code's identity, once.
   * UNAUTHENTICATED (reason `cli_code`) for an unknown, used, expired code or a wrong verifier
   * (the code is used up either way).
   */
  async redeem(code: string, verifier: string): Promise<{ token: string; expiresIn: number; sub: string; name?: string }> {
    const issued = this.codes.get(code);
    this.codes.delete(code);
    if (!issued || issued.expiresAtMs <= this.now()) throw new TetherError('UNAUTHENTICATED', 'this sign-in code is unknown, used or expired: run tether login again', { reason: 'cli_code' });
    const expected = Buffer.from(issued.challenge);
    const got = Buffer.from(VERIFIER.test(verifier) ? createHash('sha256').update(verifier).digest('base64url') : '');
    if (got.length !== expected.length || !timingSafeEqual(got, expected)) {
      throw new TetherError('UNAUTHENTICATED', 'the code verifier does not match this sign-in: run tether login again', { reason: 'cli_code' });
    }
    const ttl = CLI_LOGIN_DEFAULTS.tokenTtlSeconds;
    const token = await mintToken({ key: this.key, kind: 'client', sub: issued.identity.sub, scopes: issued.identity.scopes, ttlSeconds: ttl, now: new Date(this.now()) });
    return { token, expiresIn: ttl, sub: issued.identity.sub, name: issued.identity.name };
  }
}
