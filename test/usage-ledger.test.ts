import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { summarizeUsage, type UsageEntry } from '../core/protocol/usage.js';
import { UsageLedger } from '../gateway/usage/usage-ledger.js';
import { FileUsageStore } from '../gateway/usage/usage-store.js';
import { turnFigures } from '../gateway/usage/turn-usage.js';
import { ANONYMOUS } from '../gateway/door/principal.js';
import { sinceMs, usageCommand } from '../bin/commands/usage.js';
import type { TetherError } from '../core/errors.js';

/** A `result` line as the CLI writes it (test/engine-usage-facts.test.ts shows the real one's fields). */
function result(
  total: number,
  index: number,
  usage: Partial<Record<string, number>> = {},
  extra: Record<string, unknown> = {},
): Uint8Array {
  return Buffer.from(
    JSON.stringify({
      type: 'result',
      subtype: 'success',
      is_error: false,
      duration_ms: 1000,
      total_cost_usd: total,
      result_index: index,
      usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...usage },
      modelUsage: { 'claude-x': { costUSD: total } },
      ...extra,
    }),
  );
}

const who = (principal: string, sessionId = 's1', agent = 'builder') => ({ sessionId, agent, principal, owner: 'owner' });
const person = (sub: string, canAdmin = false) => ({ ...ANONYMOUS, sub, canAdmin });

describe('turn figures from the engine result', () => {
  it('cost is the cumulative total less the previous turn of the same process; a new process (result_index 0) starts from 0', () => {
    const a = turnFigures(result(0.5, 0), undefined)!;
    expect(a.figures.cost_usd).toBeCloseTo(0.5);
    const b = turnFigures(result(0.8, 1), a.totals)!;
    expect(b.figures.cost_usd).toBeCloseTo(0.3);
    const restarted = turnFigures(result(0.2, 0), b.totals)!;
    expect(restarted.figures.cost_usd).toBeCloseTo(0.2);
    expect(b.figures).toMatchObject({ model: 'claude-x', input_tokens: 10, output_tokens: 5, duration_ms: 1000, is_error: false });
  });

  it('the same result again is not booked twice; is_error marks a failed turn; a line that is not JSON books nothing', () => {
    const a = turnFigures(result(0.5, 0), undefined)!;
    expect(turnFigures(result(0.5, 0), a.totals)).toBeUndefined();
    expect(turnFigures(result(0.6, 1, {}, { is_error: true }), a.totals)!.figures.is_error).toBe(true);
    expect(turnFigures(Buffer.from('{not json'), undefined)).toBeUndefined();
  });

  it('the turn model is the one whose cost grew most this turn', () => {
    const line = (costs: Record<string, number>, index: number) =>
      Buffer.from(
        JSON.stringify({
          type: 'result',
          total_cost_usd: Object.values(costs).reduce((x, y) => x + y),
          result_index: index,
          modelUsage: Object.fromEntries(Object.entries(costs).map(([m, c]) => [m, { costUSD: c }])),
        }),
      );
    const a = turnFigures(line({ big: 1, small: 0.1 }, 0), undefined)!;
    expect(a.figures.model).toBe('big');
    expect(turnFigures(line({ big: 1, small: 0.5 }, 1), a.totals)!.figures.model).toBe('small');
  });
});

describe('the usage ledger', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const file = () => {
    const d = mkdtempSync(join(tmpdir(), 'tether-usage-'));
    dirs.push(d);
    return join(d, 'usage.jsonl');
  };

  it('books each turn under its author, sums by principal, session, agent and model, and reads back the same after a restart', () => {
    const path = file();
    let now = Date.UTC(2026, 0, 10, 12);
    const ledger = new UsageLedger(new FileUsageStore(path), { now: () => now });
    ledger.book(result(1, 0), who('alice'));
    now += 1000;
    ledger.book(result(3, 1), who('bob'));
    ledger.book(result(0.5, 0, { input_tokens: 100 }), who('alice', 's2', 'other'));
    const byPrincipal = ledger.read(person('admin', true), { by: 'principal' });
    expect(byPrincipal.rows.map((r) => [r.key, r.turns, +r.cost_usd.toFixed(6), r.input_tokens])).toEqual([
      ['bob', 1, 2, 10],
      ['alice', 2, 1.5, 110],
    ]);
    expect(byPrincipal.total).toMatchObject({ turns: 3, input_tokens: 120, output_tokens: 15 });
    expect(ledger.read(person('admin', true), { by: 'agent' }).rows.map((r) => r.key)).toEqual(['builder', 'other']);
    expect(ledger.sessionCost('s1')).toBeCloseTo(3);

    const reopened = new UsageLedger(new FileUsageStore(path), { now: () => now });
    expect(reopened.read(person('admin', true), { by: 'session' })).toEqual(ledger.read(person('admin', true), { by: 'session' }));
    // The next turn of s1's process is costed against the total booked before the restart.
    expect(reopened.book(result(4, 2), who('bob'))!.cost_usd).toBeCloseTo(1);
  });

  it("a session restored with history this ledger never booked (another gateway's, or aged out) is costed against its history's last engine total", () => {
    const ledger = new UsageLedger();
    ledger.seed('s1', { engine_total_usd: 3, result_index: 2 });
    expect(ledger.book(result(4, 3), who('alice'))!.cost_usd).toBeCloseTo(1);
    ledger.seed('s1', { engine_total_usd: 0.5, result_index: 0 }); // the ledger's own is newer: kept
    expect(ledger.book(result(4.5, 4), who('alice'))!.cost_usd).toBeCloseTo(0.5);
  });

  it('a non-admin sees their own turns and the turns of sessions they own; since_ms and session_id narrow it', () => {
    let now = Date.UTC(2026, 0, 10);
    const ledger = new UsageLedger(undefined, { now: () => now });
    ledger.book(result(1, 0), { ...who('alice'), owner: 'alice' });
    ledger.book(result(2, 1), { ...who('bob'), owner: 'alice' });
    now += 60_000;
    ledger.book(result(1, 0), { ...who('bob', 's2'), owner: 'bob' });
    expect(ledger.read(person('alice'), {}).total.turns).toBe(2);
    expect(ledger.read(person('alice'), {}).scope).toBe('own');
    expect(ledger.read(person('bob'), {}).total.turns).toBe(2);
    expect(ledger.read(person('bob'), { since_ms: now }).total.turns).toBe(1);
    expect(ledger.read(person('carol'), {}).total.turns).toBe(0);
    expect(ledger.read(person('admin', true), { session_id: 's2' }).total.turns).toBe(1);
  });

  it('drops turns older than the retention when it opens and when a day has passed, rewriting the store; skips a torn line', () => {
    const path = file();
    let now = Date.UTC(2026, 0, 1);
    const ledger = new UsageLedger(new FileUsageStore(path), { now: () => now, retentionDays: 2 });
    ledger.book(result(1, 0), who('alice'));
    now += 86_400_000 * 1.5;
    ledger.book(result(2, 1), who('alice'));
    now += 86_400_000;
    ledger.book(result(3, 2), who('alice')); // a day after the last prune: the first turn (2.5 days old) goes
    expect(ledger.read(person('a', true), {}).total.turns).toBe(2);
    expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(2);
    writeFileSync(path, readFileSync(path, 'utf8') + '{"torn":');
    now += 86_400_000 * 1.9;
    const reopened = new UsageLedger(new FileUsageStore(path), { now: () => now, retentionDays: 2 });
    expect(reopened.read(person('a', true), {}).total.turns).toBe(1);
  });

  it("takes another gateway's turns once (by session and result uuid), in time order, none older than the retention; a later turn of the session here stays the baseline", () => {
    let now = Date.UTC(2026, 0, 10);
    const here = new UsageLedger(undefined, { now: () => now, retentionDays: 2 });
    const there = new UsageLedger(undefined, { now: () => now, retentionDays: 90 });
    const published: UsageEntry[] = [];
    there.onBooked = (e) => published.push(e);
    const early = there.book(result(1, 0, {}, { uuid: 'r0' }), who('bob'))!;
    now += 60_000;
    const mine = here.book(result(3, 1, {}, { uuid: 'r1' }), who('alice'))!;
    expect(published).toEqual([early]);
    expect(here.take(early)).toBe(true);
    expect(here.take({ ...early })).toBe(false); // read again (a restart, a re-delivery): kept once
    expect(here.take(mine)).toBe(false); // its own turn back from the stream
    expect([...here.since(0)].map((e) => e.principal)).toEqual(['bob', 'alice']);
    expect(here.take({ ...early, result_uuid: 'old', time: new Date(now - 3 * 86_400_000).toISOString() })).toBe(false);
    // The session's baseline is still the later turn booked here: the next turn costs 0.5, not 2.5.
    expect(here.book(result(3.5, 2, {}, { uuid: 'r2' }), who('alice'))!.cost_usd).toBeCloseTo(0.5, 9);
  });
});

describe('summarizeUsage', () => {
  it('rows by key, largest cost first, failed turns counted, and the total of them all', () => {
    const e = (principal: string, cost: number, is_error = false): UsageEntry => ({
      time: '2026-01-01T00:00:00.000Z',
      session_id: 's',
      agent: 'a',
      principal,
      owner: 'o',
      model: 'm',
      input_tokens: 1,
      output_tokens: 2,
      cache_read_input_tokens: 3,
      cache_creation_input_tokens: 4,
      cost_usd: cost,
      duration_ms: 10,
      is_error,
      engine_total_usd: cost,
    });
    const r = summarizeUsage([e('a', 1), e('b', 2), e('a', 2, true)], 'principal', 'all');
    expect(r.rows.map((x) => [x.key, x.turns, x.failed_turns, x.cost_usd, x.cache_creation_input_tokens])).toEqual([
      ['a', 2, 1, 3, 8],
      ['b', 1, 0, 2, 4],
    ]);
    expect(r.total).toMatchObject({ turns: 3, failed_turns: 1, cost_usd: 5, input_tokens: 3, duration_ms: 30 });
  });
});

describe('tether usage flags', () => {
  it('--since takes minutes, hours or days; anything else, and a --by that is no key, is refused naming the flag', async () => {
    const now = Date.UTC(2026, 0, 10);
    expect(sinceMs('7d', now)).toBe(now - 7 * 86_400_000);
    expect(sinceMs('90m', now)).toBe(now - 90 * 60_000);
    expect(() => sinceMs('7w', now)).toThrow(/--since must be a number and m, h or d/);
    const refused = async (v: Record<string, unknown>) => {
      try {
        await usageCommand.run(v, []);
      } catch (err) {
        return `${(err as TetherError).code}: ${(err as TetherError).message}`;
      }
      return 'ran';
    };
    expect(await refused({ by: 'team' })).toBe('INVALID_ARGUMENT: --by must be one of principal, session, agent, model');
    expect(await refused({ since: 'yesterday' })).toMatch(/^INVALID_ARGUMENT: --since must be/);
    expect(await refused({ table: true, json: true })).toBe('INVALID_ARGUMENT: --table and --json exclude each other');
  });
});
