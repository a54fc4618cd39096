import { createECDH } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

/** The gateway's VAPID key pair (base64url, as the Push API and web-push take them). */
export interface VapidKeys {
  publicKey: string;
  privateKey: string;
}

/**
 * The VAPID keys kept at `path` (owner-only), made on first start. Every browser subscribed
 * with the public key, so it must outlive restarts: a new pair voids every subscription.
 */
export function vapidKeysAt(path: string): { keys: VapidKeys; created: boolean } {
  if (existsSync(path)) {
    const keys = JSON.parse(readFileSync(path, 'utf8')) as VapidKeys;
    if (typeof keys.publicKey !== 'string' || typeof keys.privateKey !== 'string') throw new Error(`${path} holds no VAPID key pair`);
    return { keys, created: false };
  }
  const keys = newVapidKeys();
  writeFileSync(path, JSON.stringify(keys), { mode: 0o600, flag: 'wx' });
  return { keys, created: true };
}

/**
 * A fresh pair: P-256, the public key uncompressed (65 bytes), the private one 32 bytes, as
 * web-push's generateVAPIDKeys makes them (made here so a gateway starts without loading
 * web-push). OpenSSL drops a private key's leading zero bytes, hence the padding.
 */
export function newVapidKeys(): VapidKeys {
  const ecdh = createECDH('prime256v1');
  const publicKey = ecdh.generateKeys();
  const privateKey = ecdh.getPrivateKey();
  return {
    publicKey: publicKey.toString('base64url'),
    privateKey: Buffer.concat([Buffer.alloc(32 - privateKey.length), privateKey]).toString('base64url'),
  };
}
