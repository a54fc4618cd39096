import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import webpush from 'web-push';

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

/** A fresh pair. */
export function newVapidKeys(): VapidKeys {
  const { publicKey, privateKey } = webpush.generateVAPIDKeys();
  return { publicKey, privateKey };
}
