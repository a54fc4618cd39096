/**
 * An agent's host key: an Ed25519 key pair the agent keeps in a file only its user can read,
 * so that its token alone (leaked through an engine, a log or a shell history) cannot
 * register as the agent. Each agent hello carries a fresh proof (public key, time, signature
 * over the agent name and time); the gateway pins the first key it sees per agent identity
 * (gateway/door/host-key-pins.ts) and refuses a hello without that key.
 *
 * The proof is not bound to the connection: whoever sees a hello in clear could replay it
 * within {@link HOST_KEY_MAX_SKEW_MS}. TLS keeps hellos out of sight.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { TetherError } from '../errors.js';
import type { HostKeyProof } from '../protocol/methods.js';

/** How far a proof's time may be from the gateway's clock. */
export const HOST_KEY_MAX_SKEW_MS = 5 * 60_000;

/** What the proof signs: a label, the agent's name and the time, one per line. */
const signedText = (agentName: string, signedAtMs: number) => Buffer.from(`tether-agent-hello\n${agentName}\n${signedAtMs}`);

/**
 * Reads the agent's private key (PKCS#8 PEM), creating it (mode 0600, folder 0700) on first
 * use. FAILED_PRECONDITION when the file exists but is not an Ed25519 private key.
 */
export function loadOrCreateHostKey(path: string): { key: KeyObject; created: boolean } {
  let pem: string | undefined;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new TetherError('FAILED_PRECONDITION', `cannot read host key ${path}: ${(err as NodeJS.ErrnoException).code}`);
  }
  if (pem !== undefined) {
    try {
      const key = createPrivateKey(pem);
      if (key.asymmetricKeyType !== 'ed25519') throw new Error(`a ${key.asymmetricKeyType} key`);
      return { key, created: false };
    } catch (err) {
      throw new TetherError(
        'FAILED_PRECONDITION',
        `host key ${path} is not an Ed25519 private key (${(err as Error).message}); move it away to make a new one`,
      );
    }
  }
  const { privateKey } = generateKeyPairSync('ed25519');
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    writeFileSync(path, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
    chmodSync(path, 0o600);
  } catch (err) {
    throw new TetherError(
      'FAILED_PRECONDITION',
      `cannot create host key ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message} (choose another place with --host-key-file)`,
    );
  }
  return { key: privateKey, created: true };
}

/** A fresh proof for one hello. */
export function hostKeyProof(key: KeyObject, agentName: string, now = Date.now()): HostKeyProof {
  const publicKey = createPublicKey(key).export({ type: 'spki', format: 'der' });
  return {
    public_key: publicKey.toString('base64'),
    signed_at_ms: now,
    signature: sign(null, signedText(agentName, now), key).toString('base64'),
  };
}

/** `SHA256:` and the unpadded base64 of the SHA-256 of the public key (as ssh prints them). */
export function hostKeyFingerprint(publicKeyBase64: string): string {
  return `SHA256:${createHash('sha256').update(Buffer.from(publicKeyBase64, 'base64')).digest('base64').replace(/=+$/, '')}`;
}

/** The fingerprint of a valid, current proof; PERMISSION_DENIED otherwise. */
export function verifyHostKeyProof(proof: HostKeyProof, agentName: string, now = Date.now()): string {
  if (Math.abs(now - proof.signed_at_ms) > HOST_KEY_MAX_SKEW_MS) {
    throw new TetherError(
      'PERMISSION_DENIED',
      `host key proof is ${Math.round((now - proof.signed_at_ms) / 1000)} s off the gateway's clock (at most ${HOST_KEY_MAX_SKEW_MS / 1000} s)`,
    );
  }
  let ok = false;
  try {
    const key = createPublicKey({ key: Buffer.from(proof.public_key, 'base64'), format: 'der', type: 'spki' });
    ok =
      key.asymmetricKeyType === 'ed25519' &&
      verify(null, signedText(agentName, proof.signed_at_ms), key, Buffer.from(proof.signature, 'base64'));
  } catch {
    ok = false;
  }
  if (!ok) throw new TetherError('PERMISSION_DENIED', 'host key proof does not verify');
  return hostKeyFingerprint(proof.public_key);
}
