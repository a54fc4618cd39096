import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import type { TokenKey } from '../../core/auth/keys.js';
import { TetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';

/*
 * What gateways of one cluster say to each other, and what they write to JetStream, carries
 * an HMAC-SHA256 under a key only gateways hold: derived (HKDF) from the gateways' shared
 * token key, never that key itself. A client of NATS that is not a gateway can read (if NATS
 * lets it) but cannot forge a call, a reply, a log record or a registry entry.
 */

/** HKDF's `info`: this key is for the cluster's fabric and nothing else. */
const HKDF_INFO = 'tether/cluster-fabric-mac/v1';
const MAC_BYTES = 32;
export const MAC_HEADER = 'Tether-Mac';
const TIME_HEADER = 'Tether-Ts';
const NONCE_HEADER = 'Tether-Nonce';
/** A call older or newer than this (clock skew between gateways included) is a replay: dropped. */
export const CALL_WINDOW_MS = 30_000;
/** A sealed registry value: the MAC (base64url), a dot, the JSON. */
const VALUE_MAC_CHARS = 43;

/** A message as NATS hands it over (a Msg or a JetStream message). */
export interface FabricMessage {
  subject: string;
  data: Uint8Array;
  headers?: MsgHdrs;
}

export class FabricMac {
  /** Nonces of calls seen within CALL_WINDOW_MS, with their time (replays are refused). */
  private readonly seen = new Map<string, number>();

  private constructor(private readonly key: Buffer) {}

  /**
   * From the gateways' shared token key (the secret of an HS256 key, the private key of an
   * asymmetric one). FAILED_PRECONDITION for a key that cannot sign: gateways would not share it.
   */
  static fromTokenKey(k: TokenKey): FabricMac {
    if (!k.signKey)
      throw new TetherError(
        'FAILED_PRECONDITION',
        `a cluster needs the gateways' shared key that can sign (a secret or private key); key ${k.kid} only verifies`,
      );
    const ikm = k.alg === 'HS256' ? k.signKey.export() : k.signKey.export({ format: 'der', type: 'pkcs8' });
    return new FabricMac(Buffer.from(hkdfSync('sha256', ikm, Buffer.alloc(0), HKDF_INFO, MAC_BYTES)));
  }

  private mac(...parts: (string | Uint8Array)[]): Buffer {
    const h = createHmac('sha256', this.key);
    for (const p of parts) {
      const b = typeof p === 'string' ? Buffer.from(p) : p;
      h.update(lengthOf(b.length)).update(b); // length-prefixed: no two part lists share bytes
    }
    return h.digest();
  }

  private same(mac: string | undefined, expected: Buffer): boolean {
    if (!mac) return false;
    const got = Buffer.from(mac, 'base64url');
    return got.length === expected.length && timingSafeEqual(got, expected);
  }

  /** Headers for a call, reply or answer on `subject`: time, nonce and MAC over them and the body. */
  sealMessage(subject: string, body: Uint8Array): MsgHdrs {
    const ts = String(Date.now());
    const nonce = randomBytes(12).toString('base64url');
    const h = natsHeaders();
    h.set(TIME_HEADER, ts);
    h.set(NONCE_HEADER, nonce);
    h.set(MAC_HEADER, this.mac('msg', subject, ts, nonce, body).toString('base64url'));
    return h;
  }

  /**
   * Checks a message sealed by {@link sealMessage}: UNAUTHENTICATED when unsigned, wrongly
   * signed, outside CALL_WINDOW_MS or seen before (a replay).
   */
  openMessage(m: FabricMessage, now = Date.now()): Uint8Array {
    const ts = m.headers?.get(TIME_HEADER) ?? '';
    const nonce = m.headers?.get(NONCE_HEADER) ?? '';
    if (!this.same(m.headers?.get(MAC_HEADER), this.mac('msg', m.subject, ts, nonce, m.data)))
      throw new TetherError('UNAUTHENTICATED', `unsigned or wrongly signed message on ${m.subject}`);
    if (!(Math.abs(now - Number(ts)) <= CALL_WINDOW_MS))
      throw new TetherError('UNAUTHENTICATED', `stale message on ${m.subject} (sent ${ts}, now ${now})`);
    this.prune(now);
    if (this.seen.has(nonce)) throw new TetherError('UNAUTHENTICATED', `replayed message on ${m.subject}`);
    this.seen.set(nonce, now);
    return m.data;
  }

  private prune(now: number): void {
    for (const [nonce, at] of this.seen) {
      if (now - at <= 2 * CALL_WINDOW_MS) break; // in insertion order: the rest are newer
      this.seen.delete(nonce);
    }
  }

  /** The MAC header value of one message of a session log (records as published, once per message). */
  sealRecord(subject: string, body: Uint8Array, continuation: boolean): string {
    return this.mac('log', subject, continuation ? '1' : '0', body).toString('base64url');
  }

  /** Whether a message read from a session log was written by a gateway. */
  checkRecord(m: FabricMessage, continuation: boolean): boolean {
    return this.same(m.headers?.get(MAC_HEADER), this.mac('log', m.subject, continuation ? '1' : '0', m.data));
  }

  /** A registry value: `scope` (bucket and key) bound in, so a value cannot be moved to another key. */
  sealValue(scope: string, json: string): string {
    return `${this.mac('kv', scope, json).toString('base64url')}.${json}`;
  }

  /** The JSON of a value sealed by {@link sealValue}; UNAUTHENTICATED otherwise. */
  openValue(scope: string, data: Uint8Array): string {
    const text = Buffer.from(data).toString('utf8');
    const json = text.slice(VALUE_MAC_CHARS + 1);
    if (text[VALUE_MAC_CHARS] !== '.' || !this.same(text.slice(0, VALUE_MAC_CHARS), this.mac('kv', scope, json))) {
      throw new TetherError('UNAUTHENTICATED', `unsigned or wrongly signed entry ${scope}`);
    }
    return json;
  }
}

function lengthOf(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** Forgeries of one kind are logged at most this often (with how many since). */
const DROP_LOG_EVERY_MS = 10_000;

/** Logs what was dropped for want of a seal, at most once per DROP_LOG_EVERY_MS: a flood of forgeries does not flood the log. */
export class DropLog {
  private last = 0;
  private count = 0;

  constructor(
    private readonly log: Logger,
    private readonly what: string,
  ) {}

  note(fields: Record<string, unknown>, now = Date.now()): void {
    this.count++;
    if (now - this.last < DROP_LOG_EVERY_MS) return;
    this.last = now;
    this.log.warn({ ...fields, dropped: this.count }, this.what);
    this.count = 0;
  }
}
