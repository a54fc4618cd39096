import { readFileSync } from 'node:fs';
import { JWKS_DEFAULTS, remoteKeySet } from '../core/auth/jwks.js';
import { loadKeyFile, type TokenKey } from '../core/auth/keys.js';
import { LoginDesk } from '../core/auth/login-codes.js';
import { ensureStateKey } from '../core/auth/state-dir.js';
import { TokenVerifier } from '../core/auth/verify.js';
import { TetherError } from '../core/errors.js';
import type { Logger } from '../core/logging.js';
import { BrowserSessions } from '../gateway/door/browser-sessions.js';
import { CliLoginDesk } from '../gateway/door/cli-login.js';
import { OidcSignIn } from '../gateway/door/oidc-sign-in.js';
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
                     Default: only the gateway's own http://HOST:PORT
  --oidc-issuer URL  sign people in with this OpenID Connect provider (with --oidc-client-id ID;
                     the secret from --oidc-client-secret-file FILE or TETHER_OIDC_CLIENT_SECRET).
                     Register the redirect URI https://HOST:PORT/v1/oidc/callback; map groups to
                     scopes under oidc.scopes in the config file (tether config --print explains)
  --oidc-principal-claim C  the claim naming the person (default sub; e.g. email)
  --oidc-groups-claim C     the claim listing their groups (default groups)`;

/** The configuration keys authentication is set up from (gateway/config.ts). */
export interface AuthConfig {
  auth: 'on' | 'off';
  keyFile?: string;
  jwksUrl?: string;
  /** Absolute; its key is used (and created on first run) unless keyFile or jwksUrl say otherwise. */
  stateDir: string;
  allowOrigins: string[];
  oidc: {
    issuer?: string;
    clientId?: string;
    clientSecretFile?: string;
    clientSecret?: string;
    principalClaim: string;
    groupsClaim: string;
    name?: string;
    redirectUri?: string;
    requestScopes: string[];
    scopes: Record<string, string[]>;
  };
  browserSignIn: { idleTimeoutMs: number; lifetimeMs: number };
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
export function gatewayAuthFrom(c: AuthConfig, opts: { needSigningKey?: boolean; logger?: Logger } = {}): GatewayAuthSetup {
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
  if (opts.needSigningKey && !key?.signKey)
    throw new TetherError('INVALID_ARGUMENT', `${keyPath} holds a public key: tether up mints tokens and needs the private key or secret`);
  const verifier = new TokenVerifier({ keys: key ? [key] : [], jwks: c.jwksUrl ? remoteKeySet(c.jwksUrl) : undefined });
  // A key that can sign also trades web sign-in codes for client tokens (POST /v1/login).
  const login = key?.signKey ? new LoginDesk(key) : undefined;
  // One sign-in cookie per browser, for every tab, whether it signed in by link or with the identity provider.
  const browser = new BrowserSessions({ idleMs: c.browserSignIn.idleTimeoutMs, absoluteMs: c.browserSignIn.lifetimeMs });
  const web = {
    oidc: oidcFrom(c.oidc, opts.logger),
    cli: key?.signKey ? new CliLoginDesk(key) : undefined,
    redirectUri: c.oidc.redirectUri,
  };
  return { auth: { verifier, allowOrigins, login, browser, web }, signingKey: key?.signKey ? key : undefined, keyPath, created };
}

/** The identity provider sign-in the `oidc` keys describe, if any; the secret read from its file here. */
function oidcFrom(o: AuthConfig['oidc'], logger: Logger | undefined): OidcSignIn | undefined {
  if (!o.issuer || !o.clientId) return undefined;
  const secret = o.clientSecretFile ? readFileSync(o.clientSecretFile, 'utf8').trim() : o.clientSecret;
  return new OidcSignIn({ ...o, issuer: o.issuer, clientId: o.clientId, clientSecret: secret, displayName: o.name, logger });
}

/** The warning printed when a gateway runs with --auth off. */
export const AUTH_OFF_WARNING =
  'WARNING: authentication is OFF (--auth off). Anyone who can reach this gateway can run sessions, and so commands, on its agents. Use it only on a machine you alone use.\n';
