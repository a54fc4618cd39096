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
  /** A device sign-in must be approved within this. */
  deviceTtlMs: 10 * 60_000,
  /** How often the terminal asks whether a device sign-in was approved, seconds. */
  devicePollSeconds: 2,
};

/** The letters of a code a person types (no vowels: no words; no look-alikes). */
const USER_CODE_LETTERS = 'BCDFGHJKLMNPQRSTVWXZ';

interface Device {
  userCode: string;
  identity?: BrowserIdentity;
  expiresAtMs: number;
}

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
  /** Device sign-ins by device code (the terminal's secret), and their user codes (what the person types). */
  private readonly devices = new Map<string, Device>();
  private readonly byUserCode = new Map<string, string>();

  constructor(
    private readonly key: TokenKey,
    private readonly now: () => number = Date.now,
  ) {
    if (!key.signKey)
      throw new TetherError('INVALID_ARGUMENT', 'tether login needs a gateway key that can sign (the client token is minted here)');
  }

  /** A one-time code for `identity`, bound to `challenge` (INVALID_ARGUMENT for a malformed one). */
  issue(identity: BrowserIdentity, challenge: string): string {
    if (!CHALLENGE.test(challenge))
      throw new TetherError('INVALID_ARGUMENT', 'the code challenge must be 43 base64url characters (SHA-256 of the verifier)');
    const now = this.now();
    for (const [code, i] of this.codes) if (i.expiresAtMs <= now) this.codes.delete(code);
    if (this.codes.size >= CLI_LOGIN_DEFAULTS.maxCodes)
      throw new TetherError('RESOURCE_EXHAUSTED', 'too many terminal sign-ins in progress; try again in a minute');
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
    if (!issued || issued.expiresAtMs <= this.now())
      throw new TetherError('UNAUTHENTICATED', 'this sign-in code is unknown, used or expired: run tether login again', {
        reason: 'cli_code',
      });
    const expected = Buffer.from(issued.challenge);
    const got = Buffer.from(VERIFIER.test(verifier) ? createHash('sha256').update(verifier).digest('base64url') : '');
    if (got.length !== expected.length || !timingSafeEqual(got, expected)) {
      throw new TetherError('UNAUTHENTICATED', 'the code verifier does not match this sign-in: run tether login again', {
        reason: 'cli_code',
      });
    }
    return this.mint(issued.identity);
  }

  /**
   * Starts a device sign-in (`tether login --device`): a device code the terminal keeps and
   * polls with, and a short user code (XXXX-XXXX) the person types on the gateway's page,
   * signed in, to approve it. Both live 10 minutes; beyond the cap the oldest is dropped.
   */
  startDevice(): { deviceCode: string; userCode: string; expiresIn: number; interval: number } {
    const now = this.now();
    for (const [code, d] of this.devices) if (d.expiresAtMs <= now) this.dropDevice(code, d);
    if (this.devices.size >= CLI_LOGIN_DEFAULTS.maxCodes) {
      const [code, d] = this.devices.entries().next().value!;
      this.dropDevice(code, d);
    }
    const deviceCode = randomBytes(32).toString('base64url');
    let userCode: string;
    do userCode = [...randomBytes(8)].map((b) => USER_CODE_LETTERS[b % USER_CODE_LETTERS.length]).join('');
    while (this.byUserCode.has(userCode));
    this.devices.set(deviceCode, { userCode, expiresAtMs: now + CLI_LOGIN_DEFAULTS.deviceTtlMs });
    this.byUserCode.set(userCode, deviceCode);
    return {
      deviceCode,
      userCode: `${userCode.slice(0, 4)}-${userCode.slice(4)}`,
      expiresIn: CLI_LOGIN_DEFAULTS.deviceTtlMs / 1000,
      interval: CLI_LOGIN_DEFAULTS.devicePollSeconds,
    };
  }

  /** Approves the device sign-in whose user code a signed-in person typed (case, spaces and dashes ignored). UNAUTHENTICATED (`cli_code`) for an unknown, used or expired one. */
  approveDevice(userCode: string, identity: BrowserIdentity): void {
    const typed = userCode.toUpperCase().replace(/[\s-]/g, '');
    const deviceCode = this.byUserCode.get(typed);
    const d = deviceCode === undefined ? undefined : this.devices.get(deviceCode);
    if (!d || d.identity || d.expiresAtMs <= this.now())
      throw new TetherError(
        'UNAUTHENTICATED',
        'no terminal is waiting for this code (mistyped, used, or older than 10 minutes): check it, or run tether login --device again',
        { reason: 'cli_code' },
      );
    d.identity = identity;
  }

  /**
   * The terminal asks: `pending` until the person approved, then a client token of their
   * identity, once. UNAUTHENTICATED (`cli_code`) for an unknown, used or expired device code.
   */
  async pollDevice(deviceCode: string): Promise<'pending' | { token: string; expiresIn: number; sub: string; name?: string }> {
    const d = this.devices.get(deviceCode);
    if (!d || d.expiresAtMs <= this.now()) {
      if (d) this.dropDevice(deviceCode, d);
      throw new TetherError('UNAUTHENTICATED', 'this device sign-in is unknown, used or expired: run tether login --device again', {
        reason: 'cli_code',
      });
    }
    if (!d.identity) return 'pending';
    this.dropDevice(deviceCode, d);
    return this.mint(d.identity);
  }

  private dropDevice(deviceCode: string, d: Device): void {
    this.devices.delete(deviceCode);
    this.byUserCode.delete(d.userCode);
  }

  private async mint(identity: BrowserIdentity): Promise<{ token: string; expiresIn: number; sub: string; name?: string }> {
    const ttl = CLI_LOGIN_DEFAULTS.tokenTtlSeconds;
    const token = await mintToken({
      key: this.key,
      kind: 'client',
      sub: identity.sub,
      scopes: identity.scopes,
      name: identity.name,
      ttlSeconds: ttl,
      now: new Date(this.now()),
    });
    return { token, expiresIn: ttl, sub: identity.sub, name: identity.name };
  }
}
