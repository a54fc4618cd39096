import { Counter, type Registry } from 'prom-client';
import type { UsageEntry } from '../../core/protocol/usage.js';

/** Distinct values one usage label takes before further ones are counted as "other", unless told otherwise. */
export const DEFAULT_USAGE_LABEL_CAP = 50;

/** What the operator turns on: people as a label (off by default), and the cap on each label's distinct values. */
export interface UsageMetricsOptions {
  byPrincipal?: boolean;
  labelCap?: number;
}

/** Keeps the first `cap` values of a label and folds the rest into "other", so a scrape stays bounded. */
class CappedLabel {
  private readonly seen = new Set<string>();
  constructor(private readonly cap: number) {}
  of(value: string): string {
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.cap) return 'other';
    this.seen.add(value);
    return value;
  }
}

/**
 * The usage ledger's Prometheus counters, by agent and model (and principal when the operator
 * turns it on): turns, tokens by kind, cost in USD. Every label's distinct values are capped
 * (the rest count as "other"): agent and model names come from outside too.
 */
export class UsageCounters {
  private readonly turns: Counter<string>;
  private readonly tokens: Counter<string>;
  private readonly cost: Counter<string>;
  private readonly agents: CappedLabel;
  private readonly models: CappedLabel;
  private readonly principals: CappedLabel | undefined;

  constructor(registry: Registry, opts: UsageMetricsOptions = {}) {
    const cap = opts.labelCap ?? DEFAULT_USAGE_LABEL_CAP;
    this.agents = new CappedLabel(cap);
    this.models = new CappedLabel(cap);
    this.principals = opts.byPrincipal ? new CappedLabel(cap) : undefined;
    const labels = ['agent', 'model', ...(opts.byPrincipal ? ['principal'] : [])];
    const registers = [registry];
    this.turns = new Counter({
      name: 'tether_usage_turns_total',
      help: 'Engine turns booked in the usage ledger.',
      labelNames: labels,
      registers,
    });
    this.tokens = new Counter({
      name: 'tether_usage_tokens_total',
      help: 'Tokens the engine reported per turn, by kind: input, output, cache_read, cache_creation.',
      labelNames: [...labels, 'kind'],
      registers,
    });
    this.cost = new Counter({
      name: 'tether_usage_cost_usd_total',
      help: 'Cost in USD as the engine reported it, per turn.',
      labelNames: labels,
      registers,
    });
  }

  /** One booked turn. */
  turnBooked(e: UsageEntry): void {
    const labels: Record<string, string> = { agent: this.agents.of(e.agent), model: this.models.of(e.model) };
    if (this.principals) labels.principal = this.principals.of(e.principal);
    this.turns.inc(labels);
    this.cost.inc(labels, e.cost_usd);
    const kinds = {
      input: e.input_tokens,
      output: e.output_tokens,
      cache_read: e.cache_read_input_tokens,
      cache_creation: e.cache_creation_input_tokens,
    };
    for (const [kind, n] of Object.entries(kinds)) this.tokens.inc({ ...labels, kind }, n);
  }
}
