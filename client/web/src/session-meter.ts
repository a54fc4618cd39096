/**
 * What the session header shows of the engine's spending: the session's cost, from the
 * gateway's usage ledger (each `usage` event's `session_cost_usd`, which also counts turns
 * before this page or the engine started) or, from a gateway without one, the `result` lines'
 * `total_cost_usd` (a running total per engine process, so a restarted engine starts again
 * from 0 and what the earlier one spent is kept); and how full the context is, from the
 * engine's answer to `get_context_usage` after each turn.
 */
export interface ContextUse {
  totalTokens: number;
  maxTokens: number;
  percentage: number;
}

export class SessionMeter {
  /** What earlier engine processes of this session spent. */
  private earlier = 0;
  /** The running total of the current process. */
  private current = 0;
  /** The last context use the engine reported; undefined until one turn ended. */
  context?: ContextUse;

  /** The session's cost so far as the gateway's ledger booked it; undefined until a `usage` event came. */
  private booked?: number;

  /** The session's cost so far in USD; undefined before the first result. */
  cost?: number;

  /** Reads one result line's running total. */
  onResult(totalCostUsd: unknown): void {
    if (typeof totalCostUsd !== 'number' || !Number.isFinite(totalCostUsd)) return;
    if (totalCostUsd < this.current) this.earlier += this.current; // a new engine process
    this.current = totalCostUsd;
    this.cost = this.booked ?? this.earlier + this.current;
  }

  /** Reads a `usage` event's session total: from then on the ledger's figure is the cost shown. */
  onUsage(sessionCostUsd: number): void {
    this.booked = sessionCostUsd;
    this.cost = sessionCostUsd;
  }

  /** Reads the engine's answer to get_context_usage; false when it carries no usable numbers. */
  onContextUsage(r: unknown): boolean {
    const u = r as Partial<ContextUse> | undefined;
    if (typeof u?.totalTokens !== 'number' || typeof u.maxTokens !== 'number' || !(u.maxTokens > 0)) return false;
    const percentage = typeof u.percentage === 'number' ? u.percentage : Math.round((u.totalTokens / u.maxTokens) * 100);
    this.context = { totalTokens: u.totalTokens, maxTokens: u.maxTokens, percentage };
    return true;
  }
}

/** "$0.0004", "$1.23": cents once it is worth cents, else enough digits to show it is not zero. */
export function costLabel(usd: number): string {
  return usd >= 0.01 ? `$${usd.toFixed(2)}` : `$${usd.toPrecision(2).replace(/0+$/, '').replace(/\.$/, '')}`;
}

/** "10.8k of 1M tokens (1%)". */
export function contextLabel(c: ContextUse): string {
  return `${tokens(c.totalTokens)} of ${tokens(c.maxTokens)} tokens (${c.percentage}%)`;
}

function tokens(n: number): string {
  if (n >= 1_000_000) return `${+(n / 1_000_000).toFixed(1)}M`;
  if (n >= 1000) return `${+(n / 1000).toFixed(1)}k`;
  return String(n);
}
