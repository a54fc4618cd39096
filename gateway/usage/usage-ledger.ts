import type { Logger } from '../../core/logging.js';
import { silentLogger } from '../../core/logging.js';
import { summarizeUsage, turnId, type UsageEntry, type UsageQuery, type UsageResult } from '../../core/protocol/usage.js';
import type { Principal } from '../door/principal.js';
import { turnFigures, type EngineTotals } from './turn-usage.js';
import { MemoryUsageStore, type UsageStore } from './usage-store.js';

/** How long turns are kept unless told otherwise (config `usageRetentionDays`). */
export const DEFAULT_USAGE_RETENTION_DAYS = 90;
const DAY_MS = 86_400_000;

/** Whose turn ended, where. */
export interface TurnBooking {
  sessionId: string;
  agent: string;
  /** The principal whose prompt started the turn. */
  principal: string;
  owner: string;
}

/**
 * The gateway's usage ledger: one entry per engine turn (turn-usage.ts reads the engine's
 * `result`), kept in order in memory and in its store, so it survives a restart. Turns older
 * than the retention are dropped when the ledger opens and then at most once a day, when a
 * turn is booked. Reads are sums (core/protocol/usage.ts) over what the reader may see.
 */
export class UsageLedger {
  private entries: UsageEntry[];
  /** Each session's previous turn totals: the baseline of its next turn's cost. */
  private readonly totals = new Map<string, EngineTotals>();
  /** Each session's cost so far (within the retention). */
  private readonly sessionCosts = new Map<string, number>();
  private readonly retentionMs: number;
  private nextPruneMs = 0;
  private readonly now: () => number;
  /** The turnId of every entry kept: a turn read again (the stream replays this gateway's own) is kept once. */
  private readonly ids = new Set<string>();
  /** Hears each turn booked here (a cluster publishes it to the fleet). */
  onBooked: ((entry: UsageEntry) => void) | undefined;

  constructor(
    private readonly store: UsageStore = new MemoryUsageStore(),
    opts: { retentionDays?: number; now?: () => number; logger?: Logger } = {},
  ) {
    this.now = opts.now ?? Date.now;
    this.retentionMs = (opts.retentionDays ?? DEFAULT_USAGE_RETENTION_DAYS) * DAY_MS;
    const { entries, damaged } = store.loadAll();
    if (damaged) (opts.logger ?? silentLogger).warn({ damaged, store: store.kind }, 'usage ledger lines that are not entries were skipped');
    this.entries = entries.sort((a, b) => Date.parse(a.time) - Date.parse(b.time));
    for (const e of this.entries) this.remember(e);
    this.prune();
  }

  /** The turn that a `result` line ends, booked and written; undefined when the line says nothing countable. */
  book(line: Uint8Array, who: TurnBooking): UsageEntry | undefined {
    const read = turnFigures(line, this.totals.get(who.sessionId));
    if (!read) return undefined;
    const entry: UsageEntry = {
      time: new Date(this.now()).toISOString(),
      session_id: who.sessionId,
      agent: who.agent,
      principal: who.principal,
      owner: who.owner,
      ...read.figures,
    };
    this.store.append(entry);
    this.entries.push(entry);
    this.remember(entry);
    this.totals.set(who.sessionId, read.totals); // with the models' costs, which entries do not keep
    if (this.now() >= this.nextPruneMs) this.prune();
    this.onBooked?.(entry);
    return entry;
  }

  /**
   * A turn booked elsewhere (another gateway of the cluster, or this one before a restart),
   * kept in time order unless kept already or older than the retention; true when kept.
   */
  take(entry: UsageEntry): boolean {
    const at = Date.parse(entry.time);
    if (this.ids.has(turnId(entry)) || !(at >= this.now() - this.retentionMs)) return false;
    const i = this.firstAtOrAfter(at + 1);
    const newest = i === this.entries.length;
    this.entries.splice(i, 0, entry);
    this.store.append(entry);
    // Its totals become the session's baseline only when no later turn of it is known here.
    this.remember(entry, newest || !this.totals.has(entry.session_id));
    if (this.now() >= this.nextPruneMs) this.prune(); // a gateway that only reads the fleet's turns prunes too
    return true;
  }

  /**
   * The engine totals a session's history ends with, read back by a session restored here: kept
   * as its next turn's baseline unless this ledger booked a turn of it already (its own is newer
   * or the same).
   */
  seed(sessionId: string, totals: EngineTotals): void {
    if (!this.totals.has(sessionId)) this.totals.set(sessionId, totals);
  }

  /** A session's cost so far (USD, within the retention). */
  sessionCost(sessionId: string): number {
    return this.sessionCosts.get(sessionId) ?? 0;
  }

  /** Turns that ended at or after `sinceMs`, oldest first. */
  *since(sinceMs: number): Iterable<UsageEntry> {
    for (let i = this.firstAtOrAfter(sinceMs); i < this.entries.length; i++) yield this.entries[i];
  }

  /** The index of the first entry that ended at or after `ms`. */
  private firstAtOrAfter(ms: number): number {
    let lo = 0;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (Date.parse(this.entries[mid].time) < ms) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Sums for `p`: an admin sees every turn; anyone else the turns they started and the turns
   * in sessions they owned when the turn ended (`scope` says which).
   */
  read(p: Principal, q: UsageQuery): UsageResult {
    const mine = (e: UsageEntry) => p.canAdmin || e.principal === p.sub || e.owner === p.sub;
    const picked = [...this.since(q.since_ms ?? 0)].filter((e) => (q.session_id === undefined || e.session_id === q.session_id) && mine(e));
    return summarizeUsage(picked, q.by ?? 'principal', p.canAdmin ? 'all' : 'own');
  }

  private remember(e: UsageEntry, baseline = true): void {
    this.ids.add(turnId(e));
    if (baseline) this.totals.set(e.session_id, { engine_total_usd: e.engine_total_usd, result_index: e.result_index });
    this.sessionCosts.set(e.session_id, (this.sessionCosts.get(e.session_id) ?? 0) + e.cost_usd);
  }

  /** Drops turns older than the retention (rewriting the store when any go); next time in a day. */
  private prune(): void {
    const now = this.now();
    this.nextPruneMs = now + DAY_MS;
    const cut = now - this.retentionMs;
    const keep = this.entries.findIndex((e) => Date.parse(e.time) >= cut);
    const from = keep === -1 ? this.entries.length : keep;
    if (from === 0) return;
    for (const e of this.entries.slice(0, from)) {
      this.ids.delete(turnId(e));
      const left = (this.sessionCosts.get(e.session_id) ?? 0) - e.cost_usd;
      if (left > 1e-12) this.sessionCosts.set(e.session_id, left);
      else this.sessionCosts.delete(e.session_id);
    }
    this.entries = this.entries.slice(from);
    this.store.rewrite(this.entries);
  }
}
