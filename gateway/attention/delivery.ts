/** How deliveries retry: attempts in all, and the backoff between them (doubling, capped). */
export interface RetryLimits {
  attempts: number;
  firstDelayMs: number;
  maxDelayMs: number;
  /** One attempt's bound (a receiver that never answers). */
  timeoutMs: number;
}

export const RETRY_DEFAULTS: RetryLimits = { attempts: 4, firstDelayMs: 1_000, maxDelayMs: 30_000, timeoutMs: 10_000 };

/** What one attempt came to: an HTTP status, or a network failure. */
export type AttemptResult = { status: number } | { error: string };

/** A retry can help: a network failure, 5xx, 429 and 408. */
export function retryable(r: AttemptResult): boolean {
  return 'error' in r || r.status >= 500 || r.status === 429 || r.status === 408;
}

function ok(r: AttemptResult): boolean {
  return 'status' in r && r.status >= 200 && r.status < 300;
}

/** The end of one delivery: `ok`, the last attempt's result, and how many attempts it took. */
export interface DeliveryResult {
  ok: boolean;
  last: AttemptResult;
  attempts: number;
}

/**
 * Runs `attempt` until it succeeds (2xx), fails for good (another status), or the attempts are
 * spent, waiting `firstDelayMs`, then twice that, … (at most `maxDelayMs`) between them.
 * Each attempt gets an abort signal that fires after `timeoutMs`. Never throws.
 */
export async function withRetries(attempt: (signal: AbortSignal) => Promise<AttemptResult>, limits: RetryLimits): Promise<DeliveryResult> {
  let last: AttemptResult = { error: 'not attempted' };
  for (let i = 1; i <= limits.attempts; i++) {
    try {
      last = await attempt(AbortSignal.timeout(limits.timeoutMs));
    } catch (err) {
      last = { error: (err as Error).message || String(err) };
    }
    if (ok(last)) return { ok: true, last, attempts: i };
    if (!retryable(last) || i === limits.attempts) return { ok: false, last, attempts: i };
    await new Promise((r) => setTimeout(r, Math.min(limits.maxDelayMs, limits.firstDelayMs * 2 ** (i - 1))).unref?.());
  }
  return { ok: false, last, attempts: limits.attempts };
}

/** One line of the delivery log: what was sent where, and how it went. Never a secret or a body. */
export interface DeliveryRecord {
  at: string;
  event_id: string;
  type: string;
  channel: 'webhook' | 'push';
  /** The webhook's origin, or the push service's; never the full URL (its path may be a credential). */
  target: string;
  /** Whose (a person's webhook or subscription); absent for the operator's webhooks. */
  principal?: string;
  outcome: 'sent' | 'failed' | 'dropped';
  attempts: number;
  status?: number;
  error?: string;
}

/** The last deliveries, newest last, bounded (admins read it: `tether notify log`). */
export class DeliveryLog {
  private readonly records: DeliveryRecord[] = [];

  constructor(private readonly max = 500) {}

  add(r: DeliveryRecord): void {
    this.records.push(r);
    if (this.records.length > this.max) this.records.splice(0, this.records.length - this.max);
  }

  /** The last `limit` records, newest last. */
  recent(limit = this.max): DeliveryRecord[] {
    return this.records.slice(-limit);
  }
}
