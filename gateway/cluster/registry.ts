import { KvWatchInclude, Kvm, type KV, type KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { TetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';
import { DropLog, type FabricMac } from './fabric-mac.js';
import type { RoleDecisions } from '../session/session.js';
import type { SessionRecord } from '../session/session-store.js';

/** Sessions of the fleet: key = session id, value = {@link SessionEntry}. */
export const SESSIONS_BUCKET = 'tether-sessions';
/** Live gateways: key = gateway id, value = {@link GatewayEntry}; entries age out. */
export const GATEWAYS_BUCKET = 'tether-gateways';
/** How often a gateway re-announces itself. */
export const ANNOUNCE_EVERY_MS = 2_000;
/** A gateway not heard of for this long is gone from the bucket (its entry ages out). */
export const GATEWAY_TTL_MS = 3 * ANNOUNCE_EVERY_MS;

/**
 * A session entry not written for this long leaves the bucket (a week, like the logs): the
 * entries of sessions whose gateway died and whose agent never came back do not pile up. The
 * home rewrites the entries of the sessions it holds every SESSION_TOUCH_EVERY_MS.
 */
export const SESSION_ENTRY_TTL_MS = 7 * 24 * 3600_000;
export const SESSION_TOUCH_EVERY_MS = 24 * 3600_000;

/** A listing of the live gateways gives up after this (callers fall back on the last list they had). */
export const LIVE_GATEWAYS_TIMEOUT_MS = 5_000;

/** Tries of a role update that races another change of the same entry. */
const ROLE_UPDATE_ATTEMPTS = 3;

/** What the fleet knows of one session: what it is, which gateway holds it, its owner's role decisions. */
export interface SessionEntry {
  record: SessionRecord;
  /** The gateway the session's agent is connected to (its home). */
  home: string;
  roles: RoleDecisions;
}

/** One live gateway and what it holds. */
export interface GatewayEntry {
  id: string;
  agents: string[];
  sessions: string[];
  at: string;
}

/**
 * The fleet's registry in two JetStream key-value buckets: sessions (record, home, roles) and
 * live gateways (each re-announces itself every ANNOUNCE_EVERY_MS; its entry ages out after
 * GATEWAY_TTL_MS). A session changes home only by a revision-checked update, so two gateways
 * can never both take it. Every value is sealed with the fabric's MAC: one a non-gateway
 * wrote reads as absent (logged).
 */
export class ClusterRegistry {
  private constructor(
    private readonly sessions: KV,
    private readonly gateways: KV,
    private readonly mac: FabricMac,
    log: Logger,
    private readonly listTimeoutMs = LIVE_GATEWAYS_TIMEOUT_MS,
  ) {
    this.forged = new DropLog(log, 'dropping a registry entry no gateway wrote');
  }

  private readonly forged: DropLog;

  static async open(nc: NatsConnection, mac: FabricMac, log: Logger): Promise<ClusterRegistry> {
    const kvm = new Kvm(nc);
    const sessions = await kvm.create(SESSIONS_BUCKET, { history: 1, ttl: SESSION_ENTRY_TTL_MS });
    const gateways = await kvm.create(GATEWAYS_BUCKET, { history: 1, ttl: GATEWAY_TTL_MS });
    return new ClusterRegistry(sessions, gateways, mac, log);
  }

  private encode(bucket: string, key: string, v: unknown): string {
    return this.mac.sealValue(`${bucket}/${key}`, JSON.stringify(v));
  }

  /** A PUT entry's value, if a gateway sealed it; undefined (logged) otherwise. */
  private decode<T>(bucket: string, e: KvEntry | null): T | undefined {
    if (e?.operation !== 'PUT' || !e.value.length) return undefined;
    try {
      return JSON.parse(this.mac.openValue(`${bucket}/${e.key}`, e.value)) as T;
    } catch (err) {
      this.forged.note({ bucket, key: e.key, err: (err as Error).message });
      return undefined;
    }
  }

  async putSession(entry: SessionEntry): Promise<void> {
    await this.sessions.put(entry.record.id, this.encode(SESSIONS_BUCKET, entry.record.id, entry));
  }

  /** The session's entry and its revision (for a checked update); undefined when the fleet has none. */
  async getSession(id: string): Promise<{ value: SessionEntry; revision: number } | undefined> {
    const e = await this.sessions.get(id);
    const value = this.decode<SessionEntry>(SESSIONS_BUCKET, e);
    return value && e ? { value, revision: e.revision } : undefined;
  }

  /** Makes `home` the session's home if nobody changed the entry since `revision`; ABORTED otherwise. */
  async claim(id: string, entry: SessionEntry, revision: number): Promise<void> {
    try {
      await this.sessions.update(id, this.encode(SESSIONS_BUCKET, id, entry), revision);
    } catch (err) {
      throw new TetherError('ABORTED', `session ${id} was taken by another gateway meanwhile: ${(err as Error).message}`);
    }
  }

  /** Replaces the session's role decisions; read again and retried when the entry changed meanwhile (a move). */
  async updateRoles(id: string, roles: RoleDecisions): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const e = await this.getSession(id);
      if (!e) return;
      try {
        await this.sessions.update(id, this.encode(SESSIONS_BUCKET, id, { ...e.value, roles }), e.revision);
        return;
      } catch (err) {
        if (attempt >= ROLE_UPDATE_ATTEMPTS) throw err;
      }
    }
  }

  /** Writes the entry again as it is, so it does not age out while its session lives. */
  async touchSession(id: string): Promise<void> {
    const e = await this.getSession(id);
    if (e) await this.sessions.update(id, this.encode(SESSIONS_BUCKET, id, e.value), e.revision);
  }

  async deleteSession(id: string): Promise<void> {
    await this.sessions.delete(id);
  }

  /**
   * Calls `onChange` with every session's entry now, then with every change (undefined:
   * deleted); the returned function stops the watch.
   */
  async watchSessions(onChange: (id: string, entry: SessionEntry | undefined) => void): Promise<() => void> {
    const w = await this.sessions.watch({ include: KvWatchInclude.LastValue });
    void (async () => {
      for await (const e of w) onChange(e.key, this.decode<SessionEntry>(SESSIONS_BUCKET, e));
    })().catch(() => {});
    return () => w.stop();
  }

  async announce(entry: GatewayEntry): Promise<void> {
    await this.gateways.put(entry.id, this.encode(GATEWAYS_BUCKET, entry.id, entry));
  }

  async retire(id: string): Promise<void> {
    await this.gateways.delete(id);
  }

  /**
   * The gateways heard of within GATEWAY_TTL_MS. UNAVAILABLE when the listing takes longer
   * than {@link LIVE_GATEWAYS_TIMEOUT_MS} (by default; its iterator is stopped): a KV key listing can wait
   * without end, and a create forwarded to another gateway asks for this list first.
   */
  async liveGateways(): Promise<GatewayEntry[]> {
    // A key put again while its listing runs (each gateway re-announces itself) can be listed
    // twice: one entry per gateway, or a fleet list names that gateway's agents and sessions twice.
    const out = new Map<string, GatewayEntry>();
    let keys: Awaited<ReturnType<KV['keys']>> | undefined;
    let pastDeadline = false;
    const listing = (async () => {
      keys = await this.gateways.keys();
      if (pastDeadline) keys.stop(); // the listing began only after the deadline: it is not read
      for await (const key of keys) {
        const g = this.decode<GatewayEntry>(GATEWAYS_BUCKET, await this.gateways.get(key));
        if (g) out.set(g.id, g);
      }
      return [...out.values()];
    })();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        pastDeadline = true;
        keys?.stop();
        reject(new TetherError('UNAVAILABLE', `the gateway registry did not list the gateways within ${this.listTimeoutMs} ms`));
      }, this.listTimeoutMs);
    });
    listing.catch(() => {}); // a listing that fails after the deadline has no one to tell
    try {
      return await Promise.race([listing, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
