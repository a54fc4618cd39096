import { createDecipheriv, createECDH, createPublicKey, hkdfSync, randomBytes, verify } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One message a push service stand-in received. */
export interface PushedMessage {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * A push service stand-in on 127.0.0.1 port 0: it keeps what it is sent and answers each
 * message with the next status of its path's queue (`statuses`, by path), else 201 as a real one does.
 */
export async function startPushService(statuses: Record<string, number[]> = {}) {
  const received: PushedMessage[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(statuses[path]?.shift() ?? 201).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    received,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A browser's side of a subscription: its P-256 key pair and auth secret, and what PushSubscription.toJSON() would say. */
export function browserKeys(endpoint: string) {
  const ecdh = createECDH('prime256v1');
  const publicKey = ecdh.generateKeys();
  const auth = randomBytes(16);
  return { ecdh, publicKey, auth, json: { endpoint, keys: { p256dh: publicKey.toString('base64url'), auth: auth.toString('base64url') } } };
}

/**
 * Decrypts an aes128gcm push message (RFC 8188 framing, RFC 8291 keys) as a browser does:
 * header salt(16) | rs(4) | idlen(1) | keyid (the sender's ephemeral public key); ECDH with it,
 * IKM = HKDF(auth, ecdh, "WebPush: info\0" | ua_public | as_public, 32), then the content key
 * and nonce from HKDF(salt, IKM, …); one record, padding delimiter 0x02.
 */
export function decryptPush(body: Buffer, keys: ReturnType<typeof browserKeys>): string {
  const salt = body.subarray(0, 16);
  const idlen = body[20];
  const asPublic = body.subarray(21, 21 + idlen);
  const record = body.subarray(21 + idlen);
  const ecdhSecret = keys.ecdh.computeSecret(asPublic);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), keys.publicKey, asPublic]);
  const ikm = Buffer.from(hkdfSync('sha256', ecdhSecret, keys.auth, keyInfo, 32));
  const cek = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const nonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
  const decipher = createDecipheriv('aes-128-gcm', cek, nonce);
  decipher.setAuthTag(record.subarray(record.length - 16));
  const padded = Buffer.concat([decipher.update(record.subarray(0, record.length - 16)), decipher.final()]);
  const end = padded.lastIndexOf(2); // the last record's delimiter, then zero padding
  if (end < 0 || padded.subarray(end + 1).some((b) => b !== 0)) throw new Error('bad padding');
  return padded.subarray(0, end).toString('utf8');
}

/**
 * Checks a VAPID Authorization header (RFC 8292: `vapid t=JWT, k=KEY`): the JWT is ES256,
 * signed by the key `k` (and `k` is the gateway's public key), for the push service's origin,
 * not expired and at most 24 h ahead. Returns its claims.
 */
export function checkVapid(header: string | undefined, publicKey: string, audience: string): Record<string, unknown> {
  const m = /^vapid t=([\w-]+\.[\w-]+\.[\w-]+), k=([\w-]+)$/.exec(header ?? '');
  if (!m) throw new Error(`not a vapid Authorization header: ${header}`);
  const [, jwt, k] = m;
  if (k !== publicKey) throw new Error('k is not the gateway key');
  const [h, p, s] = jwt.split('.');
  const head = JSON.parse(Buffer.from(h, 'base64url').toString());
  if (head.alg !== 'ES256') throw new Error(`alg ${head.alg}`);
  const raw = Buffer.from(k, 'base64url');
  const key = createPublicKey({
    key: { kty: 'EC', crv: 'P-256', x: raw.subarray(1, 33).toString('base64url'), y: raw.subarray(33, 65).toString('base64url') },
    format: 'jwk',
  });
  if (!verify('sha256', Buffer.from(`${h}.${p}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url')))
    throw new Error('the JWT signature does not verify with k');
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
  const now = Date.now() / 1000;
  if (claims.aud !== audience) throw new Error(`aud ${claims.aud}`);
  if (typeof claims.exp !== 'number' || claims.exp < now || claims.exp > now + 24 * 3600 + 60) throw new Error(`exp ${claims.exp}`);
  return claims;
}
