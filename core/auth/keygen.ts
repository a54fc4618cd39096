import { generateKeyPairSync, randomBytes, type JsonWebKey } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { TetherError } from '../errors.js';
import { parseKey, publicJwkOf, type TokenAlg, type TokenKey } from './keys.js';

/** A freshly generated key: the JWK to store (private) and, for asymmetric keys, the public JWK to share. */
export interface GeneratedKey {
  key: TokenKey;
  /** The private JWK with `alg` and `kid`, as written to the key file. */
  privateJwk: JsonWebKey;
  /** The public JWK (asymmetric keys only): give it to gateways that only verify. */
  publicJwk?: JsonWebKey;
}

/** RSA keys are made this big. */
const RSA_BITS = 3072;

/** Generates a signing key for `alg` (HS256: 32 random bytes; EdDSA: Ed25519; ES256: P-256; RS256: RSA 3072). */
export function generateTokenKey(alg: TokenAlg): GeneratedKey {
  let jwk: JsonWebKey;
  if (alg === 'HS256') {
    jwk = { kty: 'oct', k: randomBytes(32).toString('base64url'), kid: `hs-${randomBytes(8).toString('hex')}` };
  } else {
    const pair =
      alg === 'EdDSA'
        ? generateKeyPairSync('ed25519')
        : alg === 'ES256'
          ? generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
          : generateKeyPairSync('rsa', { modulusLength: RSA_BITS });
    jwk = pair.privateKey.export({ format: 'jwk' });
  }
  const key = parseKey(JSON.stringify({ ...jwk, alg }), 'generated key');
  return { key, privateJwk: { ...jwk, alg, kid: key.kid }, publicJwk: publicJwkOf(key) };
}

/**
 * Writes a JWK to `path` with mode 0600 (its folder is created with mode 0700). Refuses to
 * overwrite an existing file unless `force`. Throws ALREADY_EXISTS or INVALID_ARGUMENT.
 */
export function writeKeyFile(path: string, jwk: JsonWebKey, opts: { force?: boolean } = {}): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  try {
    writeFileSync(path, JSON.stringify(jwk) + '\n', { mode: 0o600, flag: opts.force ? 'w' : 'wx' });
    chmodSync(path, 0o600); // 'w' on an existing file keeps its old mode
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      throw new TetherError('ALREADY_EXISTS', `${path} already exists (pass --force to replace it)`);
    throw new TetherError('INVALID_ARGUMENT', `cannot write key file ${path}: ${(err as Error).message}`);
  }
}
