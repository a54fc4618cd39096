import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { TetherError } from '../errors.js';
import type { TokenKey } from './keys.js';
import { DISPLAY_NAME } from './principal.js';
import { checkAgentName, checkScopes } from './scopes.js';
import { TOKEN_AUDIENCE, TOKEN_ISSUER, TOKEN_TYP, type TokenKind } from './token-kinds.js';

/** What {@link mintToken} puts in a token. */
export interface MintOptions {
  /** Must hold a signing key (secret or private key). */
  key: TokenKey;
  kind: TokenKind;
  /** Who the token is for: a person, a service or an agent. 1-256 printable characters. */
  sub: string;
  /** Agent tokens: the one agent name it may register as (default: sub). */
  agent?: string;
  /** Client tokens: scopes (see scopes.ts); none means create + control on every agent. */
  scopes?: string[];
  /** Client tokens: the person's display name (`name` claim: shown beside `sub`, never used to decide). */
  name?: string;
  /** Lifetime in seconds from `now`. */
  ttlSeconds: number;
  /** Issue time (default: the clock). */
  now?: Date;
  /** More claims (tickets carry the origin they are bound to). */
  claims?: Record<string, unknown>;
}

/**
 * Signs a token: header `alg` (the key's), `typ` (per kind) and `kid`; claims `iss` 'tether',
 * `aud` 'tether-gateway', `sub`, `jti` (random), `iat`, `exp`, plus `agent` (agent tokens) or
 * `scope` (client tokens, space-separated, omitted when empty). Throws INVALID_ARGUMENT for
 * a key that cannot sign or bad claims.
 */
export async function mintToken(o: MintOptions): Promise<string> {
  if (!o.key.signKey)
    throw new TetherError('INVALID_ARGUMENT', 'this key can only verify (it is a public key); minting needs the private key or the secret');
  if (!/^[^\u0000-\u001f\u007f]{1,256}$/.test(o.sub)) throw new TetherError('INVALID_ARGUMENT', 'sub must be 1-256 printable characters');
  if (!Number.isInteger(o.ttlSeconds) || o.ttlSeconds <= 0)
    throw new TetherError('INVALID_ARGUMENT', 'the lifetime must be a positive whole number of seconds');
  const claims: Record<string, unknown> = { ...o.claims };
  if (o.kind === 'agent') {
    if (o.scopes?.length) throw new TetherError('INVALID_ARGUMENT', 'scopes are for client tokens; an agent token names its agent instead');
    claims.agent = checkAgentName(o.agent ?? o.sub);
  } else if (o.agent !== undefined) {
    throw new TetherError('INVALID_ARGUMENT', 'only agent tokens name an agent (use --scope agent:NAME to narrow a client token)');
  }
  if (o.kind === 'client' && o.scopes?.length) claims.scope = checkScopes(o.scopes).join(' ');
  if (o.name !== undefined) {
    if (o.kind !== 'client' || !DISPLAY_NAME.test(o.name))
      throw new TetherError('INVALID_ARGUMENT', 'a display name is for client tokens, 1-128 printable characters');
    claims.name = o.name;
  }
  const iat = Math.floor((o.now ?? new Date()).getTime() / 1000);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: o.key.alg, typ: TOKEN_TYP[o.kind], kid: o.key.kid })
    .setIssuer(TOKEN_ISSUER)
    .setAudience(TOKEN_AUDIENCE)
    .setSubject(o.sub)
    .setJti(randomUUID())
    .setIssuedAt(iat)
    .setExpirationTime(iat + o.ttlSeconds)
    .sign(o.key.signKey);
}
