import { JWKS_DEFAULTS, remoteKeySet } from '../core/auth/jwks.js';
import { loadKeyFile, type TokenKey } from '../core/auth/keys.js';
import { LoginDesk } from '../core/auth/login-codes.js';
import { ensureStateKey } from '../core/auth/state-dir.js';
import { TokenVerifier } from '../core/auth/verify.js';
import { TetherError } from '../core/errors.js';
import type { GatewayAuthOptions } from '../gateway/server.js';

/** Help lines for the authentication flags `tether gateway` and `tether up` share. */
export const AUTH_FLAGS_HELP = `  --state-dir DIR    folder for the gateway key (default ~/.tether; env TETHER_STATE_DIR). On
                     first run an HS256 key is created there (gateway-key.json, mode 0600)
  --key FILE         verify (and, for up, mint) tokens with this key instead: a JWK or PEM file
                     (HS256 secret, Ed25519, EC P-256 or RSA; a public key only verifies)
  --jwks-url URL     also accept tokens signed by keys of this JWKS (fetch timeout ${JWKS_DEFAULTS.timeoutMs / 1000} s, cached
                     ${JWKS_DEFAULTS.cacheMaxAgeMs / 60_000} min, response at most ${JWKS_DEFAULTS.maxBytes / 1024} KiB)
  --auth on|off      off admits everyone without a token: trusted local use only (default on)
  --allow-origin O   a browser origin (scheme://host[:port]) allowed to connect, repeatable.
                     Default: only the gateway's own http://HOST:PORT`;

/** The configuration keys authentication is set up from (gateway/config.ts). */
export interface AuthConfig {
  auth: 'on' | 'off';
  keyFile?: string;
  jwksUrl?: string;
  /** Absolute; its key is used (and created on first run) unless keyFile or jwksUrl say otherwise. */
  stateDir: string;
  allowOrigins: string[];
}

/** What the auth keys resolved to. */
export interface GatewayAuthSetup {
  auth: GatewayAuthOptions;
  /** A key tokens can be minted with (the state folder's, or keyFile when it can sign). */
  signingKey?: TokenKey;
  /** Where that key came from, and whether it was created now. */
  keyPath?: string;
  created: boolean;
}

/**
 * Turns the validated auth keys into door options. Without keyFile and jwksUrl the state
 * folder's key is used, created on first run (the only file this writes). `needSigningKey`
 * (tether up) always loads a key that can sign. Throws INVALID_ARGUMENT.
 */
export function gatewayAuthFrom(c: AuthConfig, opts: { needSigningKey?: boolean } = {}): GatewayAuthSetup {
  const allowOrigins = c.allowOrigins;
  if (c.auth === 'off') return { auth: { verifier: 'off', allowOrigins }, created: false };
  let key: TokenKey | undefined;
  let keyPath: string | undefined;
  let created = false;
  if (c.keyFile) {
    key = loadKeyFile(c.keyFile);
    keyPath = c.keyFile;
  } else if (!c.jwksUrl || opts.needSigningKey) {
    ({ key, path: keyPath, created } = ensureStateKey(c.stateDir));
  }
  if (opts.needSigningKey && !key?.signKey) throw new TetherError('INVALID_ARGUMENT', `${keyPath} holds a public key: tether up mints tokens and needs the private key or secret`);
  const verifier = new TokenVerifier({ keys: key ? [key] : [], jwks: c.jwksUrl ? remoteKeySet(c.jwksUrl) : undefined });
  // A key that can sign also trades web sign-in codes for client tokens (POST /v1/login).
  const login = key?.signKey ? new LoginDesk(key) : undefined;
  return { auth: { verifier, allowOrigins, login }, signingKey: key?.signKey ? key : undefined, keyPath, created };
}

/** The warning printed when a gateway runs with --auth off. */
export const AUTH_OFF_WARNING =
  'WARNING: authentication is OFF (--auth off). Anyone who can reach this gateway can run sessions, and so commands, on its agents. Use it only on a machine you alone use.\n';
