import type { UsageEntry } from '../../core/protocol/usage.js';

/**
 * One turn's usage read from the engine's `result` line. Seen with the real CLI
 * (test/engine-usage-facts.test.ts, docs/engine-protocol.md 4.1): `usage` is the turn's own,
 * summed over its model calls; `total_cost_usd` and `modelUsage` are cumulative over the
 * engine process's turns, and `result_index` counts them from 0. So a turn's cost is the
 * total less the previous turn's total of the same process, and a new process (result_index
 * 0, or a total that fell: the engine was restarted) starts from 0. A result with the previous
 * turn's index and total is that turn again (an agent re-sends output the gateway had not
 * acked when it restarted) and is not booked twice.
 */

/** What the ledger keeps between two turns of one session: the previous turn's process totals. */
export interface EngineTotals {
  engine_total_usd: number;
  result_index?: number;
  /** Cost per model so far in this process (modelUsage's costUSD); absent after a gateway restart. */
  modelCosts?: Record<string, number>;
}

/** The turn-specific fields of an entry (the rest says whose turn and where). */
export type TurnFigures = Pick<
  UsageEntry,
  | 'model'
  | 'input_tokens'
  | 'output_tokens'
  | 'cache_read_input_tokens'
  | 'cache_creation_input_tokens'
  | 'cost_usd'
  | 'duration_ms'
  | 'is_error'
  | 'engine_total_usd'
  | 'result_index'
  | 'result_uuid'
>;

const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);

/**
 * The figures of one `result` line (its bytes, parsed here once per turn), given the previous
 * turn's totals of the same session; undefined when the line is not a result the engine could
 * have counted (not JSON). `totals` is what to keep for the next turn.
 */
export function turnFigures(
  line: Uint8Array,
  previous: EngineTotals | undefined,
): { figures: TurnFigures; totals: EngineTotals } | undefined {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(Buffer.from(line.buffer, line.byteOffset, line.byteLength).toString('utf8'));
  } catch {
    return undefined;
  }
  if (v.type !== 'result') return undefined;
  const usage = (typeof v.usage === 'object' && v.usage !== null ? v.usage : {}) as Record<string, unknown>;
  const total = count(v.total_cost_usd);
  const index = typeof v.result_index === 'number' ? v.result_index : undefined;
  // The same result again (an agent re-sending output the gateway had not acked before a restart): booked already.
  if (previous && index !== undefined && index === previous.result_index && total === previous.engine_total_usd) return undefined;
  const sameProcess = previous !== undefined && index !== 0 && total >= previous.engine_total_usd;
  const base = sameProcess ? previous : undefined;
  const modelCosts = modelCostsOf(v.modelUsage);
  const figures: TurnFigures = {
    model: turnModel(modelCosts, base?.modelCosts),
    input_tokens: count(usage.input_tokens),
    output_tokens: count(usage.output_tokens),
    cache_read_input_tokens: count(usage.cache_read_input_tokens),
    cache_creation_input_tokens: count(usage.cache_creation_input_tokens),
    cost_usd: Math.max(0, total - (base?.engine_total_usd ?? 0)),
    duration_ms: count(v.duration_ms),
    is_error: v.is_error === true,
    engine_total_usd: total,
    ...(index === undefined ? {} : { result_index: index }),
    ...(typeof v.uuid === 'string' && v.uuid.length <= 128 ? { result_uuid: v.uuid } : {}),
  };
  return { figures, totals: { engine_total_usd: total, result_index: index, modelCosts } };
}

function modelCostsOf(v: unknown): Record<string, number> {
  const out: Record<string, number> = {};
  if (typeof v !== 'object' || v === null) return out;
  for (const [model, u] of Object.entries(v)) out[model] = count((u as { costUSD?: unknown } | null)?.costUSD);
  return out;
}

/** The model whose cost grew most this turn (the one that did most of its work); "unknown" when none is named. */
function turnModel(now: Record<string, number>, before: Record<string, number> | undefined): string {
  let best: string | undefined;
  let grew = -1;
  for (const [model, cost] of Object.entries(now)) {
    const d = cost - (before?.[model] ?? 0);
    if (d > grew) [best, grew] = [model, d];
  }
  return best ?? 'unknown';
}
