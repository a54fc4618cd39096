import { describe, expect, it } from 'vitest';
import type { UsageEntry } from '../core/protocol/usage.js';
import { GatewayMetrics } from '../gateway/metrics.js';

const entry = (principal: string, agent = 'builder', model = 'claude-x'): UsageEntry => ({
  time: '2026-01-01T00:00:00.000Z',
  session_id: 's',
  agent,
  principal,
  owner: principal,
  model,
  input_tokens: 100,
  output_tokens: 10,
  cache_read_input_tokens: 5,
  cache_creation_input_tokens: 1,
  cost_usd: 0.25,
  duration_ms: 1000,
  is_error: false,
  engine_total_usd: 0.25,
});

describe('usage counters on /metrics', () => {
  it('count turns, tokens by kind and cost by agent and model; people are no label unless the operator turns it on', async () => {
    const m = new GatewayMetrics();
    m.turnBooked(entry('alice'));
    m.turnBooked(entry('bob'));
    const text = (await m.render()).body;
    expect(text).toContain('tether_usage_turns_total{agent="builder",model="claude-x"} 2');
    expect(text).toContain('tether_usage_cost_usd_total{agent="builder",model="claude-x"} 0.5');
    expect(text).toContain('tether_usage_tokens_total{agent="builder",model="claude-x",kind="input"} 200');
    expect(text).toContain('tether_usage_tokens_total{agent="builder",model="claude-x",kind="cache_creation"} 2');
    expect(text).not.toContain('alice');
  });

  it('with people turned on, the first N distinct principals (and agents, and models) are labels; the rest count as "other"', async () => {
    const m = new GatewayMetrics({ usage: { byPrincipal: true, labelCap: 2 } });
    for (const p of ['alice', 'bob', 'carol', 'dave']) m.turnBooked(entry(p));
    m.turnBooked(entry('alice', 'a2', 'm2'));
    m.turnBooked(entry('alice', 'a3', 'm3'));
    const text = (await m.render()).body;
    expect(text).toContain('tether_usage_turns_total{agent="builder",model="claude-x",principal="alice"} 1');
    expect(text).toContain('tether_usage_turns_total{agent="builder",model="claude-x",principal="other"} 2');
    expect(text).toContain('tether_usage_turns_total{agent="other",model="other",principal="alice"} 1');
    expect(text).not.toContain('carol');
  });
});
