import { createHash } from 'node:crypto';
import { KvWatchInclude, Kvm, type KV, type KvEntry } from '@nats-io/kv';
import { TetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';
import { checkPrefs, EMPTY_PREFS, MemoryPrefsStore, type PersonPrefs } from '../attention/notify-prefs.js';
import type { VapidKeys } from '../attention/vapid-keys.js';
import { DropLog, type FabricMac } from './fabric-mac.js';
import type { NatsLink } from './nats-link.js';

/**
 * People's notification settings and the VAPID key pair of the whole cluster: key `vapid`
 * (a sealed {@link VapidKeys}, claimed once) and `n.<hash of principal>` (a sealed {@link PrefsEntry}).
 */
export const NOTIFY_BUCKET = 'tether-notify';

const VAPID_KEY = 'vapid';
/** How long a joining gateway waits to have read everyone's settings. */
const LOAD_TIMEOUT_MS = 10_000;
/** Tries of the VAPID claim while another gateway writes it at the same moment. */
const CLAIM_ATTEMPTS = 3;
/** Tries of a person's change while other gateways write their changes of that person (each try one of them wins). */
const PREFS_WRITE_ATTEMPTS = 10;

interface PrefsEntry {
  principal: string;
  prefs: PersonPrefs;
}

const prefsKey = (principal: string) => `n.${createHash('sha256').update(principal).digest('hex').slice(0, 40)}`;

/**
 * The attention room's settings shared by every gateway of a cluster (gateway/cluster/shared-trust.ts
 * does the same for revocations and pins): a person who subscribes or follows through one gateway is
 * notified by whichever gateway holds the session, signed with the one VAPID pair their browser knows.
 */
export class SharedNotify {
  private stopWatch: (() => void) | undefined;
  private readonly forged: DropLog;

  private constructor(
    private readonly kv: KV,
    private readonly mac: FabricMac,
    private readonly log: Logger,
  ) {
    this.forged = new DropLog(log, 'dropping notification settings no gateway wrote');
  }

  static async open(link: NatsLink, mac: FabricMac, log: Logger): Promise<SharedNotify> {
    return new SharedNotify(await new Kvm(link.nc).create(NOTIFY_BUCKET, { history: 1 }), mac, log);
  }

  private open(e: KvEntry | null): unknown {
    if (e?.operation !== 'PUT' || !e.value.length) return undefined;
    try {
      return JSON.parse(this.mac.openValue(`${NOTIFY_BUCKET}/${e.key}`, e.value));
    } catch (err) {
      this.forged.note({ key: e.key, err: (err as Error).message });
      return undefined;
    }
  }

  private seal(key: string, v: unknown): string {
    return this.mac.sealValue(`${NOTIFY_BUCKET}/${key}`, JSON.stringify(v));
  }

  /**
   * The cluster's VAPID pair: `candidate` if this gateway is the first to claim one (a create:
   * of two gateways at once one wins), else the pair a gateway claimed before.
   */
  async claimVapid(candidate: VapidKeys): Promise<{ keys: VapidKeys; claimed: boolean }> {
    const value = this.seal(VAPID_KEY, candidate);
    for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
      const e = await this.kv.get(VAPID_KEY);
      const held = this.open(e) as VapidKeys | undefined;
      if (typeof held?.publicKey === 'string' && typeof held.privateKey === 'string') return { keys: held, claimed: false };
      try {
        if (e) await this.kv.update(VAPID_KEY, value, e.revision);
        else await this.kv.create(VAPID_KEY, value);
        return { keys: candidate, claimed: true };
      } catch {
        // Written meanwhile: read it again.
      }
    }
    throw new TetherError('UNAVAILABLE', "cannot claim the cluster's VAPID keys (their entry kept changing)");
  }

  /**
   * People's settings, the cluster's: everything the bucket holds is read before this returns
   * (bounded), then taken in as other gateways change it; a change here is put to the bucket.
   * Best effort while NATS is away: the change holds on this gateway and is put on the next one.
   */
  async prefsStore(): Promise<MemoryPrefsStore> {
    const failed = (err: unknown) => this.log.warn({ err: String(err) }, "cannot share a person's notification settings with the cluster");
    const kv = this.kv;
    const seal = (key: string, v: unknown) => this.seal(key, v);
    const open = (e: KvEntry | null) => this.open(e) as PrefsEntry | undefined;
    /**
     * Applies `change` to the bucket's latest entry of `principal`, revision-checked: a change made
     * meanwhile through another gateway is kept (this one is applied again on top of it).
     */
    const publish = async (principal: string, change: (p: PersonPrefs) => PersonPrefs) => {
      const key = prefsKey(principal);
      for (let attempt = 1; attempt <= PREFS_WRITE_ATTEMPTS; attempt++) {
        const e = await kv.get(key);
        const held = open(e);
        const prefs = checkPrefs(change(held?.principal === principal ? { ...EMPTY_PREFS, ...held.prefs } : EMPTY_PREFS));
        const value = seal(key, { principal, prefs } satisfies PrefsEntry);
        try {
          if (e) await kv.update(key, value, e.revision);
          else await kv.create(key, value);
          return;
        } catch {
          // Written meanwhile: apply the change to what was written.
        }
      }
      throw new TetherError('UNAVAILABLE', `the notification settings of ${principal} kept changing`);
    };
    // Changed here at once (the answer shows it), then in the bucket, whose watch brings the merged entry back.
    // One write at a time per person from this gateway, in the order they were made.
    const queues = new Map<string, Promise<void>>();
    const store = new (class extends MemoryPrefsStore {
      override update(principal: string, change: (p: PersonPrefs) => PersonPrefs): PersonPrefs {
        const next = super.update(principal, change);
        const queued = (queues.get(principal) ?? Promise.resolve()).then(() => publish(principal, change)).catch(failed);
        queues.set(principal, queued);
        void queued.then(() => queues.get(principal) === queued && queues.delete(principal));
        return next;
      }
    })();
    const w = await kv.watch({ include: KvWatchInclude.LastValue });
    this.stopWatch = () => w.stop();
    let caughtUp!: () => void;
    const done = new Promise<void>((resolve) => (caughtUp = resolve));
    if ((await kv.status()).values === 0) caughtUp();
    void (async () => {
      for await (const e of w) {
        const entry = e.key.startsWith('n.') ? (this.open(e) as PrefsEntry | undefined) : undefined;
        if (entry && prefsKey(entry.principal) === e.key) store.take(entry.principal, entry.prefs);
        if (e.delta === 0 || e.isUpdate) caughtUp();
      }
    })().catch(failed);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new TetherError('UNAVAILABLE', `the cluster's notification settings were not read within ${LOAD_TIMEOUT_MS} ms`)),
        LOAD_TIMEOUT_MS,
      );
    });
    await Promise.race([done, late]).finally(() => clearTimeout(timer));
    return store;
  }

  close(): void {
    this.stopWatch?.();
  }
}
