import { describe, expect, it } from 'vitest';
import { budgetStandings, budgetWindow, type Budget } from '../core/policy/budgets.js';
import { Policy } from '../core/policy/policy.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { UsageDesk } from '../gateway/usage/usage-desk.js';
import { UsageLedger } from '../gateway/usage/usage-ledger.js';
import type { UsageEntry } from '../core/protocol/usage.js';
import type { TetherError } from '../core/errors.js';

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

describe('budget windows (UTC calendar)', () => {
  it('a day runs from 00:00 UTC to the next 00:00 UTC, whatever the local zone', () => {
    const w = budgetWindow('day', Date.UTC(2026, 11, 31, 23, 59, 59, 999));
    expect([iso(w.sinceMs), iso(w.resetsAtMs)]).toEqual(['2026-12-31T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
    const next = budgetWindow('day', Date.UTC(2027, 0, 1));
    expect(iso(next.sinceMs)).toBe('2027-01-01T00:00:00.000Z');
  });

  it('a month runs from the 1st 00:00 UTC to the next 1st, across year ends and leap Februaries', () => {
    const feb = budgetWindow('month', Date.UTC(2028, 1, 29, 12));
    expect([iso(feb.sinceMs), iso(feb.resetsAtMs)]).toEqual(['2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z']);
    const dec = budgetWindow('month', Date.UTC(2026, 11, 15));
    expect(iso(dec.resetsAtMs)).toBe('2027-01-01T00:00:00.000Z');
  });

  it('a session budget has no window: it counts the whole session and never resets', () => {
    expect(budgetWindow('session', Date.UTC(2026, 5, 1))).toEqual({ sinceMs: 0, resetsAtMs: undefined });
  });
});

const entry = (principal: string, time: string, cost: number, over: Partial<UsageEntry> = {}): UsageEntry => ({
  time,
  session_id: 's1',
  agent: 'builder',
  principal,
  owner: principal,
  model: 'm',
  input_tokens: 100,
  output_tokens: 0,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
  cost_usd: cost,
  duration_ms: 1,
  is_error: false,
  engine_total_usd: cost,
  ...over,
});

describe('which turns count against a budget', () => {
  const now = Date.parse('2026-03-10T12:00:00Z');
  const turns = [
    entry('alice', '2026-03-09T23:59:59Z', 4), // yesterday (UTC): not today's
    entry('alice', '2026-03-10T00:00:00Z', 1),
    entry('bob', '2026-03-10T01:00:00Z', 2),
    entry('carol', '2026-03-10T02:00:00Z', 3, { agent: 'other', session_id: 's2' }),
  ];
  const since = (ms: number) => turns.filter((t) => Date.parse(t.time) >= ms);
  const spent = (b: Budget, principal: string, agent = 'builder', sessionId = 's1') =>
    budgetStandings([b], { principal, agent, sessionId }, { team: ['alice', 'bob'] }, now, since).map((s) => s.spentUsd);

  it('"*" counts each principal on their own; a principal only theirs; a group its members together; no who everyone', () => {
    expect(spent({ who: '*', per: 'day', usd: 5 }, 'alice')).toEqual([1]);
    expect(spent({ who: '*', per: 'month', usd: 5 }, 'alice')).toEqual([5]);
    expect(spent({ who: 'bob', per: 'day', usd: 5 }, 'bob')).toEqual([2]);
    expect(spent({ who: 'bob', per: 'day', usd: 5 }, 'alice')).toEqual([]); // does not apply to alice
    expect(spent({ who: 'group:team', per: 'day', usd: 5 }, 'alice')).toEqual([3]);
    expect(spent({ who: 'group:team', per: 'day', usd: 5 }, 'carol', 'other')).toEqual([]);
    expect(spent({ per: 'day', usd: 50 }, 'carol', 'other')).toEqual([6]);
  });

  it('agent: NAME counts and stops only that agent; per: session counts the session the prompt goes to', () => {
    expect(spent({ agent: 'other', per: 'day', usd: 5 }, 'alice', 'other')).toEqual([3]);
    expect(spent({ agent: 'other', per: 'day', usd: 5 }, 'alice', 'builder')).toEqual([]);
    expect(spent({ per: 'session', usd: 50 }, 'alice', 'builder', 's1')).toEqual([7]);
    expect(spent({ per: 'session', usd: 50 }, 'alice', 'other', 's2')).toEqual([3]);
  });
});

describe('budgets in the policy file', () => {
  it('takes the issue syntax and refuses a budget without an amount, a bad per, a warn outside 0..1 or an unknown group', () => {
    expect(
      Policy.compile({
        budgets: [
          { who: '*', per: 'day', usd: 5 },
          { who: 'group:t', per: 'month', tokens: 200000, warn: 0.5 },
        ],
        groups: { t: ['a'] },
      }).budgets,
    ).toHaveLength(2);
    const refused = (budgets: unknown[]) => {
      try {
        Policy.compile({ budgets });
      } catch (err) {
        return (err as TetherError).message;
      }
      return 'accepted';
    };
    expect(refused([{ who: '*', per: 'day' }])).toMatch(/budgets\.0.*usd or tokens/);
    expect(refused([{ who: '*', per: 'week', usd: 1 }])).toMatch(/budgets\.0\.per/);
    expect(refused([{ who: '*', per: 'day', usd: 1, warn: 1.5 }])).toMatch(/budgets\.0\.warn/);
    expect(refused([{ who: 'group:nobody', per: 'day', usd: 1 }])).toMatch(/names no group/);
    expect(refused([{ who: '*', per: 'day', usd: 1, cap: 2 }])).toMatch(/cap/);
  });
});

describe('the usage desk: prompts admitted against budgets, notices when a turn crosses a threshold', () => {
  const line = (total: number, index: number) =>
    Buffer.from(
      JSON.stringify({
        type: 'result',
        is_error: false,
        total_cost_usd: total,
        result_index: index,
        usage: { input_tokens: 1, output_tokens: 1 },
      }),
    );
  const subject = { principal: 'alice', agent: 'builder', sessionId: 's1' };
  const booking = { ...subject, owner: 'alice' };

  it('warns at the threshold, says when it is reached, then refuses the next prompt naming the budget and when it resets; a new UTC day admits again', () => {
    let now = Date.parse('2026-03-10T22:00:00Z');
    const desk = new UsageDesk(
      new UsageLedger(undefined, { now: () => now }),
      new StaticPolicy(Policy.compile({ budgets: [{ who: '*', per: 'day', usd: 1, warn: 0.5 }] })),
      undefined,
      () => now,
    );
    const heard: string[] = [];
    desk.onNotice((n) => heard.push(n.state));
    desk.admit(subject);
    expect(desk.turnEnded(line(0.3, 0), booking)!.notices).toEqual([]);
    expect(desk.turnEnded(line(0.6, 1), booking)!.notices.map((n) => n.state)).toEqual(['warning']);
    desk.admit(subject); // 60%: still admitted
    const reached = desk.turnEnded(line(1.2, 2), booking)!.notices; // a turn that crosses mid-way is booked whole
    expect(reached.map((n) => [n.state, n.resets_at])).toEqual([['reached', '2026-03-11T00:00:00.000Z']]);
    expect(heard).toEqual(['warning', 'reached']);
    let refusal: TetherError | undefined;
    try {
      desk.admit(subject);
    } catch (err) {
      refusal = err as TetherError;
    }
    expect(refusal?.code).toBe('RESOURCE_EXHAUSTED');
    expect(refusal?.message).toBe(
      'over budget: budgets[0] (who: *, per: day, usd: 1) is spent ($1.2000 of $1); it resets at 2026-03-11T00:00:00.000Z',
    );
    desk.admit({ ...subject, principal: 'bob' }); // "*": each principal on their own
    now = Date.parse('2026-03-11T00:00:00Z');
    desk.admit(subject);
  });
});
