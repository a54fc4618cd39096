import { createHash, createPrivateKey, createPublicKey, createSecretKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { TetherError } from '../errors.js';

/** The signature algorithms Tether signs and verifies with; nothing else is ever accepted. */
export const TOKEN_ALGS = ['HS256', 'EdDSA', 'ES256', 'RS256'] as const;

/** One of {@link TOKEN_ALGS}. */
export type TokenAlg = (typeof TOKEN_ALGS)[number];

/** Asymmetric algorithms: the only ones a remote JWKS may use. */
export const ASYMMETRIC_ALGS: readonly TokenAlg[] = ['EdDSA', 'ES256', 'RS256'];

/**
 * A key tokens are signed or verified with. Its algorithm follows from the key itself and is
 * pinned: a token naming another algorithm is refused whatever it carries.
 */
export interface TokenKey {
  /** Key id: the JWK's `kid`, else its RFC 7638 thumbprint. Tokens carry it in their header. */
  kid: string;
  alg: TokenAlg;
  /** The secret (HS256) or the public key. */
  verifyKey: KeyObject;
  /** The secret or the private key; undefined for a public-only key (verify only). */
  signKey?: KeyObject;
}

/** Key files are small; anything bigger is not a key. */
const MAX_KEY_FILE_BYTES = 64 * 1024;
/** Shortest HS256 secret accepted (RFC 7518 §3.2: at least the hash size). */
const MIN_SECRET_BYTES = 32;
const MIN_RSA_BITS = 2048;

/** Reads a key file (a JWK as JSON, or PEM: PKCS#8/SEC1/PKCS#1 private, SPKI public, or an X.509 certificate). */
export function loadKeyFile(path: string): TokenKey {
  let text: string;
  try {
    if (statSync(path).size > MAX_KEY_FILE_BYTES) throw new Error(`larger than ${MAX_KEY_FILE_BYTES} bytes`);
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `cannot read key file ${path}: ${(err as Error).message}`);
  }
  return parseKey(text, path);
}

/** Parses key text (JWK JSON or PEM); `source` names it in errors. Throws INVALID_ARGUMENT. */
export function parseKey(text: string, source = 'key'): TokenKey {
  const trimmed = text.trim();
  try {
    if (trimmed.startsWith('{')) return fromJwk(JSON.parse(trimmed) as JsonWebKey);
    if (trimmed.startsWith('-----BEGIN')) return fromPem(trimmed);
  } catch (err) {
    if (err instanceof TetherError) throw new TetherError(err.code, `${source}: ${err.message}`);
    throw new TetherError('INVALID_ARGUMENT', `${source}: not a usable key (${(err as Error).message})`);
  }
  throw new TetherError('INVALID_ARGUMENT', `${source}: not a key (expected a JWK as JSON, or PEM)`);
}

function fromJwk(jwk: JsonWebKey): TokenKey {
  if (Array.isArray((jwk as { keys?: unknown } | null)?.keys))
    throw new TetherError(
      'INVALID_ARGUMENT',
      'a key set (JWKS) file is not supported here; pass one key, or serve the set and use --jwks-url',
    );
  if (typeof jwk !== 'object' || jwk === null || typeof jwk.kty !== 'string')
    throw new TetherError('INVALID_ARGUMENT', 'a JWK needs "kty"');
  if (jwk.kty === 'oct') {
    if (jwk.alg !== undefined && jwk.alg !== 'HS256')
      throw new TetherError('INVALID_ARGUMENT', `a secret key must be HS256, not ${String(jwk.alg)}`);
    const secret = Buffer.from(String(jwk.k ?? ''), 'base64url');
    if (secret.length < MIN_SECRET_BYTES)
      throw new TetherError('INVALID_ARGUMENT', `an HS256 secret needs at least ${MIN_SECRET_BYTES} bytes, this one has ${secret.length}`);
    const key = createSecretKey(secret);
    return { kid: kidOf(jwk), alg: 'HS256', verifyKey: key, signKey: key };
  }
  const isPrivate = typeof jwk.d === 'string';
  const signKey = isPrivate ? createPrivateKey({ key: jwk, format: 'jwk' }) : undefined;
  const verifyKey = signKey ? createPublicKey(signKey) : createPublicKey({ key: jwk, format: 'jwk' });
  const alg = algOf(verifyKey);
  if (jwk.alg !== undefined && jwk.alg !== alg)
    throw new TetherError('INVALID_ARGUMENT', `the JWK says alg ${String(jwk.alg)} but the key is for ${alg}`);
  const kid = typeof jwk.kid === 'string' && jwk.kid !== '' ? checkKid(jwk.kid) : kidOf(publicJwkOf({ alg, verifyKey, kid: '' })!);
  return { kid, alg, verifyKey, signKey };
}

function fromPem(pem: string): TokenKey {
  const signKey = /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem) ? createPrivateKey(pem) : undefined;
  const verifyKey = signKey ? createPublicKey(signKey) : createPublicKey(pem);
  const alg = algOf(verifyKey);
  return { kid: kidOf(publicJwkOf({ alg, verifyKey, kid: '' })!), alg, verifyKey, signKey };
}

/** The algorithm an asymmetric public key is pinned to. */
function algOf(key: KeyObject): TokenAlg {
  const type = key.asymmetricKeyType;
  const details = key.asymmetricKeyDetails ?? {};
  if (type === 'ed25519') return 'EdDSA';
  if (type === 'ec' && details.namedCurve === 'prime256v1') return 'ES256';
  if (type === 'rsa') {
    if ((details.modulusLength ?? 0) < MIN_RSA_BITS)
      throw new TetherError('INVALID_ARGUMENT', `RSA keys need at least ${MIN_RSA_BITS} bits`);
    return 'RS256';
  }
  const what = type === 'ec' ? `EC curve ${String(details.namedCurve)}` : String(type);
  throw new TetherError('INVALID_ARGUMENT', `unsupported key type ${what} (supported: HS256 secret, Ed25519, EC P-256, RSA)`);
}

/** The public JWK of a key (with `alg`, `kid`, `use: "sig"`); undefined for HS256 secrets. */
export function publicJwkOf(key: Pick<TokenKey, 'alg' | 'verifyKey' | 'kid'>): JsonWebKey | undefined {
  if (key.alg === 'HS256') return undefined;
  const jwk = key.verifyKey.export({ format: 'jwk' });
  return { ...jwk, alg: key.alg, use: 'sig', ...(key.kid ? { kid: key.kid } : {}) };
}

/** kid: the JWK's own, else its RFC 7638 thumbprint (SHA-256 of the required members). */
function kidOf(jwk: JsonWebKey): string {
  if (typeof jwk.kid === 'string' && jwk.kid !== '') return checkKid(jwk.kid);
  const members: Record<string, string[]> = {
    oct: ['k', 'kty'],
    OKP: ['crv', 'kty', 'x'],
    EC: ['crv', 'kty', 'x', 'y'],
    RSA: ['e', 'kty', 'n'],
  };
  const names = members[String(jwk.kty)] ?? [];
  const canonical = JSON.stringify(Object.fromEntries(names.map((n) => [n, (jwk as Record<string, unknown>)[n]])));
  return createHash('sha256').update(canonical).digest('base64url');
}

function checkKid(kid: string): string {
  if (!/^[A-Za-z0-9._:-]{1,128}$/.test(kid))
    throw new TetherError('INVALID_ARGUMENT', 'a "kid" must be 1-128 of letters, digits and . _ : -');
  return kid;
}
