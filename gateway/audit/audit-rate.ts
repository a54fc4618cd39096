import { silentLogger, type Logger } from '../../core/logging.js';
import type { AuditQuery, AuditResult } from '../../core/protocol/audit.js';
import { recordQuietly, type AuditEntry, type AuditLog } from './audit-log.js';

/** How many attach and detach records one principal may cause per window before they are counted instead. */
export interface MembershipRate {
  /** Attach and detach records written one by one per principal and window. */
  perWindow: number;
  windowMs: number;
}

export const MEMBERSHIP_RATE_DEFAULTS: MembershipRate = { perWindow: 60, windowMs: 60_000 };

/** What a window held back for one principal, session and action. */
interface Held {
  session_id: string;
  principal: string;
  action: 'attach' | 'detach';
  count: number;
  first: string;
  last: string;
  roles: Set<string>;
}

/**
 * An audit trail in front of another that bounds what attaching and detaching in a loop can
 * write (issue 27, item 11): each principal's first `perWindow` attach and detach records in
 * a window (`windowMs` long, from the first record after the previous one ended) are written as usual; past that, each is counted, and when
 * the window ends one record per principal, session and action says how many there were
 * (`coalesced`: the count, `first` and `last`: when, `roles`: the roles attached with). A
 * detach that ends a connection for a reason (`cut`: a revoked or expired token, a slow
 * consumer) and a `result: "failed"` note are always written one by one; every other record
 * passes straight through. Summaries are written when the window ends and on {@link flush}.
 */
export class MembershipRateAudit implements AuditLog {
  private windowStart = 0;
  private readonly written = new Map<string, number>();
  private readonly held = new Map<string, Held>();
  private timer: NodeJS.Timeout | undefined;
  private readonly rate: MembershipRate;
  private readonly log: Logger;

  constructor(
    private readonly inner: AuditLog,
    rate: Partial<MembershipRate> = {},
    opts: { logger?: Logger; now?: () => number } = {},
  ) {
    this.rate = { ...MEMBERSHIP_RATE_DEFAULTS, ...rate };
    this.log = opts.logger ?? silentLogger;
    this.now = opts.now ?? Date.now;
  }

  private readonly now: () => number;

  record(entry: AuditEntry): void {
    if (!isPlainMembership(entry)) return this.inner.record(entry);
    const now = this.now();
    if (now >= this.windowStart + this.rate.windowMs) this.startWindow(now);
    const n = this.written.get(entry.principal) ?? 0;
    if (n < this.rate.perWindow) {
      this.inner.record(entry); // throws as before (the attach is refused when it cannot be recorded)
      this.written.set(entry.principal, n + 1);
      return;
    }
    this.hold(entry, new Date(now).toISOString());
  }

  read(query: AuditQuery): Promise<AuditResult> {
    return this.inner.read(query);
  }

  /** Writes the summaries held so far (the window ends, or the gateway closes). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const h of this.held.values()) {
      const entry = {
        session_id: h.session_id,
        principal: h.principal,
        action: h.action,
        coalesced: h.count,
        first: h.first,
        last: h.last,
        roles: [...h.roles].sort(),
      };
      recordQuietly(this.inner, entry, this.log);
    }
    this.held.clear();
  }

  private startWindow(now: number): void {
    this.flush();
    this.written.clear();
    this.windowStart = now; // a window runs from the first record after the last one ended
  }

  private hold(entry: AuditEntry, at: string): void {
    const action = entry.action as Held['action'];
    const key = JSON.stringify([entry.principal, entry.session_id, action]);
    let h = this.held.get(key);
    if (!h) {
      h = { session_id: entry.session_id, principal: entry.principal, action, count: 0, first: at, last: at, roles: new Set() };
      this.held.set(key, h);
    }
    h.count++;
    h.last = at;
    if (typeof entry.role === 'string' && h.roles.size < 8) h.roles.add(entry.role);
    if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), this.windowStart + this.rate.windowMs - this.now());
      this.timer.unref();
    }
  }
}

/** An attach or detach with nothing else to say: the kind a loop repeats. */
function isPlainMembership(e: AuditEntry): boolean {
  return (e.action === 'attach' || e.action === 'detach') && e.cut === undefined && e.result === undefined;
}
