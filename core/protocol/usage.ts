import { z } from 'zod';

/**
 * The usage ledger's records and queries, defined once: the gateway writes one entry per
 * engine turn (gateway/usage/), `usage.read` returns them summed, `tether usage` and
 * `RemoteSession.usage()` print and read them.
 */

/** What turns used: the engine's four token counts, its cost in USD and the time it took (summed, or one turn's). */
export const UsageFigures = z.object({
  input_tokens: z.number().nonnegative(),
  output_tokens: z.number().nonnegative(),
  cache_read_input_tokens: z.number().nonnegative(),
  cache_creation_input_tokens: z.number().nonnegative(),
  cost_usd: z.number().nonnegative(),
  duration_ms: z.number().nonnegative(),
});

/** What one turn of the engine used, as the gateway books it (wire names); its cost is the engine's, the turn's own share. */
export const UsageEntry = z.object({
  /** When the turn ended (the engine's `result`), ISO 8601 UTC. */
  time: z.string(),
  session_id: z.string(),
  agent: z.string(),
  /** The principal whose prompt started the turn (tether:unknown when the gateway cannot tell). */
  principal: z.string(),
  /** The session's owner when the turn ended: they may read their sessions' usage. */
  owner: z.string(),
  /** The model that did most of the turn's work ("unknown" when the engine named none). */
  model: z.string(),
  ...UsageFigures.shape,
  /** The engine judged the turn failed (`is_error`). */
  is_error: z.boolean(),
  /** The engine process's cumulative `total_cost_usd` after this turn, and its `result_index`: the next turn's baseline. */
  engine_total_usd: z.number().nonnegative(),
  result_index: z.number().int().nonnegative().optional(),
  /** The `uuid` of the engine's result line: with the session id, the turn's identity (turnId). */
  result_uuid: z.string().max(128).optional(),
});
export type UsageEntry = z.infer<typeof UsageEntry>;
export type UsageFigures = z.infer<typeof UsageFigures>;

/**
 * A turn's identity, by which it is booked once (a cluster's gateways all read every turn):
 * its session and the result line's uuid, or, for an engine that sends none, the result
 * index and the time it was booked.
 */
export function turnId(e: Pick<UsageEntry, 'session_id' | 'result_uuid' | 'result_index' | 'time'>): string {
  return e.result_uuid ? `${e.session_id}/${e.result_uuid}` : `${e.session_id}/${e.result_index ?? '-'}/${e.time}`;
}

/** What usage can be summed by. */
export const UsageGroupBy = z.enum(['principal', 'session', 'agent', 'model']);
export type UsageGroupBy = z.infer<typeof UsageGroupBy>;

/** Which entries to sum: since a time, of one session; grouped by one key (default principal). */
export const UsageQuery = z.object({
  /** Only turns that ended at or after this time (epoch ms). */
  since_ms: z.number().int().nonnegative().optional(),
  session_id: z.string().min(1).max(128).optional(),
  by: UsageGroupBy.optional(),
});
export type UsageQuery = z.infer<typeof UsageQuery>;

/** The sums of a set of turns. */
export const UsageSums = z.object({
  turns: z.number().int().nonnegative(),
  failed_turns: z.number().int().nonnegative(),
  ...UsageFigures.shape,
});
export type UsageSums = z.infer<typeof UsageSums>;

/** What a query found: one row per key (largest cost first) and the total; `scope` says whose turns the caller may see. */
export const UsageResult = z.object({
  by: UsageGroupBy,
  rows: z.array(UsageSums.extend({ key: z.string() })),
  total: UsageSums,
  scope: z.enum(['all', 'own']),
});
export type UsageResult = z.infer<typeof UsageResult>;

/** Just the figures of an entry (its tokens, cost and time). */
export function figuresOf(e: UsageFigures): UsageFigures {
  return UsageFigures.parse(e);
}

/** Every token the engine counted for a turn: what a `tokens` budget counts. */
export function entryTokens(
  e: Pick<UsageEntry, 'input_tokens' | 'output_tokens' | 'cache_read_input_tokens' | 'cache_creation_input_tokens'>,
): number {
  return e.input_tokens + e.output_tokens + e.cache_read_input_tokens + e.cache_creation_input_tokens;
}

/** Sums of no turns. */
export function emptySums(): UsageSums {
  return {
    turns: 0,
    failed_turns: 0,
    input_tokens: 0,
    output_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
    cost_usd: 0,
    duration_ms: 0,
  };
}

/** Adds one entry to `s` (in place). */
export function addEntry(s: UsageSums, e: UsageEntry): UsageSums {
  s.turns++;
  if (e.is_error) s.failed_turns++;
  s.input_tokens += e.input_tokens;
  s.output_tokens += e.output_tokens;
  s.cache_read_input_tokens += e.cache_read_input_tokens;
  s.cache_creation_input_tokens += e.cache_creation_input_tokens;
  s.cost_usd += e.cost_usd;
  s.duration_ms += e.duration_ms;
  return s;
}

/** Entries summed per `by` key, largest cost first (then by key), with the total. */
export function summarizeUsage(entries: Iterable<UsageEntry>, by: UsageGroupBy, scope: UsageResult['scope']): UsageResult {
  const rows = new Map<string, UsageSums>();
  const total = emptySums();
  const keyOf = { principal: 'principal', session: 'session_id', agent: 'agent', model: 'model' } as const;
  for (const e of entries) {
    const key = e[keyOf[by]];
    addEntry(rows.get(key) ?? rows.set(key, emptySums()).get(key)!, e);
    addEntry(total, e);
  }
  const list = [...rows].map(([key, s]) => ({ key, ...s }));
  list.sort((a, b) => b.cost_usd - a.cost_usd || a.key.localeCompare(b.key));
  return { by, rows: list, total, scope };
}
