/**
 * The gateway's VAPID key pair (gateway/attention/vapid-keys.ts), made with node:crypto so a
 * gateway starts without loading web-push: the shape web-push's own generateVAPIDKeys gives,
 * which web-push then signs with.
 */
import { createECDH } from 'node:crypto';
import webpush from 'web-push';
import { describe, expect, it } from 'vitest';
import { newVapidKeys } from '../gateway/attention/vapid-keys.js';

describe('newVapidKeys', () => {
  it('a P-256 pair: the public key uncompressed (65 bytes), the private key 32 bytes even with leading zeros, the one derived from the other', () => {
    // Pairs until one whose private key begins with a zero byte (1 in 256) has come, at least 500.
    const pairs: ReturnType<typeof newVapidKeys>[] = [];
    let leadingZero = false;
    while ((pairs.length < 500 || !leadingZero) && pairs.length < 50_000) {
      const pair = newVapidKeys();
      pairs.push(pair);
      const pub = Buffer.from(pair.publicKey, 'base64url');
      const priv = Buffer.from(pair.privateKey, 'base64url');
      expect([pub.length, pub[0], priv.length]).toEqual([65, 0x04, 32]);
      const ecdh = createECDH('prime256v1');
      ecdh.setPrivateKey(priv);
      expect(ecdh.getPublicKey().equals(pub)).toBe(true);
      leadingZero ||= priv[0] === 0;
    }
    expect(leadingZero).toBe(true);
    expect(new Set(pairs.map((p) => p.privateKey)).size).toBe(pairs.length);
  });

  it('web-push signs with it: its own checks of a VAPID pair pass and it gives the Authorization header', () => {
    const { publicKey, privateKey } = newVapidKeys();
    const headers = webpush.getVapidHeaders('https://push.example', 'mailto:ops@tether.test', publicKey, privateKey, 'aes128gcm');
    expect(headers.Authorization).toMatch(new RegExp(`^vapid t=[\\w-]+\\.[\\w-]+\\.[\\w-]+, k=${publicKey}$`));
  });
});
