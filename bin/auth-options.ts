import { remoteKeySet } from '../core/auth/jwks.js';
import { loadKeyFile, type TokenKey } from '../core/auth/keys.js';
import { ensureStateKey, resolveStateDir } from '../core/auth/state-dir.js';
import { TokenVerifier } from '../core/auth/verify.js';
import { TetherError } from '../core/errors.js';
import type { GatewayAuthOptions } from '../gateway/server.js';
import type { OptionSpec } from './args.js';

/** The flags `tether gateway` and `tether up` share for authentication. */
export const AUTH_FLAGS = {
  'state-dir': { type: 'string' },
  key: { type: 'string' },
  'jwks-url': { type: 'string' },
  auth: { type: 'string' },
  'allow-origin': { type: 'string', multiple: true },
} as const satisfies OptionSpec;

/** Help lines for {@link AUTH_FLAGS}. */
export const AUTH_FLAGS_HELP = `  --state-dir DIR    folder for the gateway key (default ~/.tether; env TETHER_STATE_DIR). On
                     first run an HS256 key is created there (gateway-key.json, mode 0600)
  --key FILE         verify (and, for up, mint) tokens with this key instead: a JWK or PEM file
                     (HS256 secret, Ed25519, EC P-256 or RSA; a public key only verifies)
  --jwks-url URL     also accept tokens signed by keys of this JWKS (fetch timeout 5 s, cached
                     10 min, response at most 64 KiB)
  --auth on|off      off admits everyone without a token: trusted local use only (default on)
  --allow-origin O   a browser origin (scheme://host[:port]) allowed to connect, repeatable.
                     Default: only the gateway's own http://HOST:PORT`;

/** What the auth flags resolved to. */
export interface GatewayAuthSetup {
  auth: GatewayAuthOptions;
  /** A key tokens can be minted with (the state folder's, or --key when it can sign). */
  signingKey?: TokenKey;
  /** Where that key came from, and whether it was created now. */
  keyPath?: string;
  created: boolean;
}

/**
 * Resolves --auth, --key, --jwks-url, --state-dir and --allow-origin into door options.
 * Without --key and --jwks-url the state folder's key is used, created on first run.
 * `needSigningKey` (tether up) always loads a key that can sign. Throws INVALID_ARGUMENT.
 */
export function gatewayAuthFrom(v: Record<string, unknown>, opts: { needSigningKey?: boolean } = {}): GatewayAuthSetup {
  const mode = (v.auth as string | undefined) ?? process.env.TETHER_AUTH ?? 'on';
  if (mode !== 'on' && mode !== 'off') throw new TetherError('INVALID_ARGUMENT', `--auth must be on or off, got "${mode}"`);
  const allowOrigins = (v['allow-origin'] as string[] | undefined) ?? [];
  if (mode === 'off') return { auth: { verifier: 'off', allowOrigins }, created: false };
  const keyFile = v.key as string | undefined;
  const jwksUrl = v['jwks-url'] as string | undefined;
  if (keyFile && v['state-dir']) throw new TetherError('INVALID_ARGUMENT', 'use --key or --state-dir, not both');
  let key: TokenKey | undefined;
  let keyPath: string | undefined;
  let created = false;
  if (keyFile) {
    key = loadKeyFile(keyFile);
    keyPath = keyFile;
  } else if (!jwksUrl || opts.needSigningKey) {
    ({ key, path: keyPath, created } = ensureStateKey(resolveStateDir(v['state-dir'] as string | undefined)));
  }
  if (opts.needSigningKey && !key?.signKey) throw new TetherError('INVALID_ARGUMENT', `${keyPath} holds a public key: tether up mints tokens and needs the private key or secret`);
  const verifier = new TokenVerifier({ keys: key ? [key] : [], jwks: jwksUrl ? remoteKeySet(jwksUrl) : undefined });
  return { auth: { verifier, allowOrigins }, signingKey: key?.signKey ? key : undefined, keyPath, created };
}

/** The warning printed when a gateway runs with --auth off. */
export const AUTH_OFF_WARNING =
  'WARNING: authentication is OFF (--auth off). Anyone who can reach this gateway can run sessions, and so commands, on its agents. Use it only on a machine you alone use.\n';
