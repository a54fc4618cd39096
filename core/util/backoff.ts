/** Exponential backoff with jitter (threats.md part 3). */
export interface BackoffPolicy {
  initialMs: number;
  factor: number;
  maxMs: number;
  /** ± fraction of the delay, e.g. 0.2 for ±20 %. */
  jitter: number;
}

/** Agents: start 1 s, ×1.6, ±20 %, cap 120 s. */
export const AGENT_BACKOFF: BackoffPolicy = { initialMs: 1_000, factor: 1.6, maxMs: 120_000, jitter: 0.2 };
/** Interactive clients: start 0.5 s, ×1.6, ±20 %, cap 30 s. */
export const CLIENT_BACKOFF: BackoffPolicy = { initialMs: 500, factor: 1.6, maxMs: 30_000, jitter: 0.2 };

/** Delay before retry number `attempt` (0-based). `random` is injectable for tests. */
export function backoffDelay(attempt: number, p: BackoffPolicy, random: () => number = Math.random): number {
  const base = Math.min(p.maxMs, p.initialMs * p.factor ** attempt);
  const spread = base * p.jitter * (random() * 2 - 1);
  return Math.max(0, Math.round(base + spread));
}
