import { createHash } from 'node:crypto';
import { KvWatchInclude, Kvm, type KV, type KvEntry } from '@nats-io/kv';
import { TetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';
import type { SharedPins } from '../door/host-key-pins.js';
import { BrowserSignInRecord, type BrowserSessions } from '../door/browser-sessions.js';
import { Revocation, type RevocationList } from '../door/revocations.js';
import { DropLog, type FabricMac } from './fabric-mac.js';
import type { NatsLink } from './nats-link.js';

/** Revocations of the whole cluster: key `j.<hash of jti>` or `s.<hash of sub>.<ms>`, value a sealed {@link Revocation}. */
export const REVOCATIONS_BUCKET = 'tether-revocations';
/** Agents' pinned host keys of the whole cluster: key `p.<hash of identity>`, value a sealed {@link PinEntry}. */
export const HOST_KEYS_BUCKET = 'tether-host-keys';
/** Browser sign-ins of the whole cluster: key `b.<the cookie's SHA-256>`, value a sealed {@link BrowserSignInRecord}. */
export const SIGN_INS_BUCKET = 'tether-browser-sign-ins';

interface PinEntry {
  identity: string;
  fingerprint: string;
}

/** How long a joining gateway waits to have read every revocation of the cluster. */
const LOAD_TIMEOUT_MS = 10_000;
/** Tries of a pin whose entry another gateway writes at the same moment. */
const CLAIM_ATTEMPTS = 3;

const hashOf = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 40);

/** A revocation's key: one per jti; one per subject and time (the latest of a subject covers the earlier). */
function revocationKey(r: Revocation): string {
  return r.jti !== undefined ? `j.${hashOf(r.jti)}` : `s.${hashOf(r.sub!)}.${Date.parse(r.at)}`;
}

/**
 * What a gateway trusts that must hold on every gateway of the cluster: revocations, agents'
 * host-key pins and browser sign-ins, in JetStream key-value buckets, sealed with the fabric's MAC.
 * A revocation added on one gateway (tether revoke over its state folder) is published here
 * and reaches every other gateway's list through a watch, which cuts live connections as a
 * local revoke does. A pin is claimed with a create (only the first key wins, cluster-wide)
 * and read at each agent hello.
 */
export class SharedTrust implements SharedPins {
  private readonly published = new Set<string>();
  /** Pins read from the bucket: used only when NATS cannot be asked (fail closed for others). */
  private readonly pinCache = new Map<string, string>();
  private stopWatch: (() => void) | undefined;
  private unlisten: (() => void) | undefined;
  private stopSignIns: (() => void) | undefined;
  private closed = false;
  private readonly forged: DropLog;

  private constructor(
    private readonly link: NatsLink,
    private readonly revocations: KV,
    private readonly hostKeys: KV,
    private readonly signIns: KV,
    private readonly mac: FabricMac,
    private readonly log: Logger,
  ) {
    this.forged = new DropLog(log, 'dropping a revocation or pin no gateway wrote');
  }

  static async open(link: NatsLink, mac: FabricMac, log: Logger): Promise<SharedTrust> {
    const kvm = new Kvm(link.nc);
    const revocations = await kvm.create(REVOCATIONS_BUCKET, { history: 1 });
    const hostKeys = await kvm.create(HOST_KEYS_BUCKET, { history: 1 });
    const signIns = await kvm.create(SIGN_INS_BUCKET, { history: 1 });
    return new SharedTrust(link, revocations, hostKeys, signIns, mac, log);
  }

  /** A PUT entry's JSON, when a gateway sealed it; undefined (logged) otherwise. */
  private open(bucket: string, e: KvEntry | null): unknown {
    if (e?.operation !== 'PUT' || !e.value.length) return undefined;
    try {
      return JSON.parse(this.mac.openValue(`${bucket}/${e.key}`, e.value));
    } catch (err) {
      this.forged.note({ bucket, key: e.key, err: (err as Error).message });
      return undefined;
    }
  }

  private seal(bucket: string, key: string, v: unknown): string {
    return this.mac.sealValue(`${bucket}/${key}`, JSON.stringify(v));
  }

  /**
   * Keeps `list` and the cluster's revocations one: every revocation of the bucket is added
   * to the list now (before the gateway listens) and as it arrives; the list's own (its file)
   * are published now and whenever the file changes. Watched afresh when NATS comes back.
   */
  async shareRevocations(list: RevocationList): Promise<void> {
    const take = (e: KvEntry) => {
      const parsed = Revocation.safeParse(this.open(REVOCATIONS_BUCKET, e));
      if (parsed.success) list.addShared(parsed.data);
    };
    const watch = async () => {
      this.stopWatch?.();
      const w = await this.revocations.watch({ include: KvWatchInclude.LastValue });
      this.stopWatch = () => w.stop();
      let caughtUp!: () => void;
      const done = new Promise<void>((resolve) => (caughtUp = resolve));
      if ((await this.revocations.status()).values === 0) caughtUp();
      void (async () => {
        for await (const e of w) {
          take(e);
          if (e.delta === 0 || e.isUpdate) caughtUp(); // the last of what the bucket held
        }
      })().catch(() => {});
      return done;
    };
    const publish = () =>
      void this.publishLocal(list).catch((err: unknown) =>
        this.log.warn({ err: String(err) }, 'cannot publish revocations to the cluster yet; retried on the next change or reconnect'),
      );
    await this.publishLocal(list);
    // Every revocation of the cluster is in before the gateway listens: fail closed otherwise.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new TetherError('UNAVAILABLE', `the cluster's revocations were not read within ${LOAD_TIMEOUT_MS} ms`)),
        LOAD_TIMEOUT_MS,
      );
    });
    await Promise.race([watch(), late]).finally(() => clearTimeout(timer));
    const stopLocal = list.onChange(publish);
    const stopLink = this.link.onChange((s) => {
      if (s.kind !== 'up' || this.closed) return;
      publish();
      watch().catch((err: unknown) => this.log.warn({ err: String(err) }, 'cannot watch the cluster revocations again'));
    });
    this.unlisten = () => {
      stopLocal();
      stopLink();
    };
  }

  /**
   * Keeps `browser` and the cluster's browser sign-ins one, so a browser signed in on one
   * gateway stays signed in on another after a fail-over, and a sign-out anywhere ends it
   * everywhere. This gateway's sign-ins are published now and as they change; the bucket's
   * are taken in now and as they arrive (a delete ends the sign-in here, its connections
   * too). Best effort: while NATS is away, sign-ins stay on the gateway that made them.
   */
  async shareBrowserSignIns(browser: BrowserSessions): Promise<void> {
    const failed = (err: unknown) => this.log.warn({ err: String(err) }, 'cannot share a browser sign-in with the cluster');
    const put = (r: BrowserSignInRecord) => {
      const key = `b.${r.hash}`;
      void this.signIns.put(key, this.seal(SIGN_INS_BUCKET, key, r)).catch(failed);
    };
    const stopMirror = browser.mirrorTo({ put, drop: (hash) => void this.signIns.delete(`b.${hash}`).catch(failed) });
    for (const r of browser.records()) put(r);
    const w = await this.signIns.watch({ include: KvWatchInclude.LastValue });
    void (async () => {
      for await (const e of w) {
        // Its own puts come back too: adopting a sign-in it holds only moves its last use forward.
        if (e.operation === 'DEL' || e.operation === 'PURGE') browser.forget(e.key.slice(2));
        else {
          const parsed = BrowserSignInRecord.safeParse(this.open(SIGN_INS_BUCKET, e));
          if (parsed.success && `b.${parsed.data.hash}` === e.key) browser.adopt(parsed.data);
        }
      }
    })().catch(failed);
    this.stopSignIns = () => {
      stopMirror();
      w.stop();
    };
  }

  private async publishLocal(list: RevocationList): Promise<void> {
    for (const r of list.fromFile) {
      const key = revocationKey(r);
      if (this.published.has(key)) continue;
      await this.revocations.put(key, this.seal(REVOCATIONS_BUCKET, key, r));
      this.published.add(key);
      this.log.info({ by: r.jti !== undefined ? 'jti' : 'sub' }, 'revocation published to the cluster');
    }
  }

  /** The key pinned for `identity` cluster-wide; UNAVAILABLE when NATS cannot say and no pin was seen here. */
  async pinOf(identity: string): Promise<string | undefined> {
    try {
      const v = this.open(HOST_KEYS_BUCKET, await this.hostKeys.get(`p.${hashOf(identity)}`)) as PinEntry | undefined;
      if (v?.identity === identity) this.pinCache.set(identity, v.fingerprint);
      return v?.identity === identity ? v.fingerprint : undefined;
    } catch (err) {
      const cached = this.pinCache.get(identity);
      if (cached !== undefined) return cached;
      throw new TetherError('UNAVAILABLE', `cannot read the cluster's host key pins: ${(err as Error).message}`);
    }
  }

  /**
   * Pins `fingerprint` for `identity` unless a gateway pinned one first; returns the pin in
   * force. A create or a revision-checked update, so of two gateways pinning at once one
   * wins and the other reads its pin; an entry no gateway sealed does not hold the name.
   */
  async claim(identity: string, fingerprint: string): Promise<string> {
    const key = `p.${hashOf(identity)}`;
    const value = this.seal(HOST_KEYS_BUCKET, key, { identity, fingerprint } satisfies PinEntry);
    for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
      const e = await this.hostKeys.get(key);
      const pinned = this.open(HOST_KEYS_BUCKET, e) as PinEntry | undefined;
      if (pinned) {
        this.pinCache.set(identity, pinned.fingerprint);
        return pinned.fingerprint; // another gateway was first
      }
      try {
        if (e) await this.hostKeys.update(key, value, e.revision);
        else await this.hostKeys.create(key, value);
        this.pinCache.set(identity, fingerprint);
        return fingerprint;
      } catch {
        // Written meanwhile: read it again.
      }
    }
    throw new TetherError('UNAVAILABLE', `cannot pin the host key of ${identity} in the cluster (its entry kept changing)`);
  }

  close(): void {
    this.closed = true;
    this.stopWatch?.();
    this.unlisten?.();
    this.stopSignIns?.();
  }
}
