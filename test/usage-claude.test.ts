/**
 * Issue 35, the usage ledger and budgets, with the real Claude Code CLI and a scripted model
 * that reports known token counts: each turn is booked under the principal whose prompt
 * started it, `tether usage` reads the same sums, a gateway restart loses none of it, and a
 * daily budget lets a turn that crosses it finish and refuses the next prompt, audited.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { describeEvent } from '../client/terminal-render.js';
import { Transcript } from '../client/web/src/transcript.js';
import type { TetherEvent } from '../core/protocol/events.js';
import type { UsageResult } from '../core/protocol/usage.js';
import { Policy } from '../core/policy/policy.js';
import { ANONYMOUS } from '../gateway/door/principal.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { runTether } from './support/cli.js';
import { isResult, rejectionOf, until } from './support/items.js';
import { startRestartable, type RestartableStack } from './support/restartable-stack.js';

type UsageEvent = Extract<TetherEvent, { subtype: 'usage' }>;
type BudgetEvent = Extract<TetherEvent, { subtype: 'budget' }>;
const eventsOf = <E extends TetherEvent>(items: SessionItem[], subtype: E['subtype']) =>
  items.flatMap((i) => (i.kind === 'event' && i.event.subtype === subtype ? [i.event as E] : []));
const ADMIN = { ...ANONYMOUS, sub: 'auditor' };

/** One turn: `s` sends `text`; `it` (any member's stream) is read until the turn's result and its usage event; returns what it read. */
async function turn(s: RemoteSession, it: AsyncIterator<SessionItem>, text: string): Promise<SessionItem[]> {
  const seen: SessionItem[] = [];
  await s.sendUserMessage(text);
  await until(it, isResult, seen, 90_000, `the result of "${text}"`);
  // The usage event follows the result in the same burst.
  await until(it, (i) => i.kind === 'event' && i.event.subtype === 'usage', seen, 10_000, 'the usage event');
  return seen;
}

/** The engine's cumulative cost after the newest result in `items`. */
const engineTotal = (items: SessionItem[]) =>
  items.flatMap((i) => (isResult(i) ? [(i as unknown as { message: { total_cost_usd: number } }).message.total_cost_usd] : [])).at(-1)!;

describe('the usage ledger and budgets with the real CLI', () => {
  let stack: RestartableStack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it("two people's turns land in the ledger under their authors with the scripted sums; tether usage --by principal --json says the same; a gateway restart loses none of it", async () => {
    stack = await startRestartable({ engine: 'claude' });
    stack.fake!.setScenario({
      responses: [
        { text: 'For alice.', usage: { input_tokens: 1000, output_tokens: 100, cache_read_input_tokens: 40 } },
        { text: 'For bob.', usage: { input_tokens: 2000, output_tokens: 200, cache_creation_input_tokens: 70 } },
        { text: 'Alice again.', usage: { input_tokens: 500, output_tokens: 50 } },
        { text: 'After the restart.', usage: { input_tokens: 300, output_tokens: 30 } },
      ],
    });
    const alice = await (await stack.client('ws', 'alice')).createSession({ agent: 'builder', options: { cwd: stack.cwd } });
    const bob = await (await stack.client('ws', 'bob')).attach(alice.id);
    const ia = alice[Symbol.asyncIterator]();
    const seen = [...(await turn(alice, ia, 'one')), ...(await turn(bob, ia, 'two')), ...(await turn(alice, ia, 'three'))];

    const booked = eventsOf<UsageEvent>(seen, 'usage');
    expect(
      booked.map((e) => [e.principal, e.input_tokens, e.output_tokens, e.cache_read_input_tokens, e.cache_creation_input_tokens]),
    ).toEqual([
      ['alice', 1000, 100, 40, 0],
      ['bob', 2000, 200, 0, 70],
      ['alice', 500, 50, 0, 0],
    ]);
    // Each turn's cost is its own share: together they are the engine's cumulative total.
    const total = engineTotal(seen);
    expect(booked.reduce((n, e) => n + e.cost_usd, 0)).toBeCloseTo(total, 9);
    expect(booked.at(-1)!.session_cost_usd).toBeCloseTo(total, 9);

    const sums = stack.gateway.usage.ledger.read({ ...ADMIN, canAdmin: true }, { by: 'principal' });
    expect(sums.rows.map((r) => [r.key, r.turns, r.input_tokens, r.output_tokens])).toEqual(
      expect.arrayContaining([
        ['alice', 2, 1500, 150],
        ['bob', 1, 2000, 200],
      ]),
    );
    expect(sums.rows).toHaveLength(2);

    // The CLI reads the same over the wire; a non-admin who does not own the session sees only their own turn.
    const cli = async (sub: string, scopes?: string[]): Promise<UsageResult> => {
      const r = await runTether(['usage', '--by', 'principal', '--json', '--since', '1d'], {
        env: { TETHER_GATEWAY: stack!.url('ws'), TETHER_TOKEN: await stack!.token(sub, scopes) },
      });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout) as UsageResult;
    };
    expect(await cli('auditor', ['admin'])).toEqual(sums);
    const bobs = await cli('bob');
    expect(bobs.scope).toBe('own');
    expect(bobs.rows.map((r) => [r.key, r.input_tokens])).toEqual([['bob', 2000]]);
    expect((await bob.usage()).total.turns).toBe(1);
    expect((await alice.usage({ by: 'session' })).rows).toEqual([expect.objectContaining({ key: alice.id, turns: 3 })]);

    await stack.restart();
    expect(await cli('auditor', ['admin'])).toEqual(sums);
    // The engine outlived the gateway: the next turn is costed against the total booked before the restart.
    const again = await (await stack.client('ws', 'alice')).attach(alice.id);
    const ia2 = again[Symbol.asyncIterator]();
    // Its stream replays the session from the start: read on to the new turn's usage.
    const after: SessionItem[] = [];
    await again.sendUserMessage('four');
    let booked4 = 0;
    const fourth = (i: SessionItem) => i.kind === 'event' && i.event.subtype === 'usage' && ++booked4 === 4;
    await until(ia2, fourth, after, 90_000, 'the fourth turn to be booked');
    const last = eventsOf<UsageEvent>(after, 'usage').at(-1)!;
    expect([last.principal, last.input_tokens]).toEqual(['alice', 300]);
    expect(last.session_cost_usd).toBeCloseTo(engineTotal(after), 9);
    expect((await again.usage()).total.turns).toBe(4);
  }, 300_000);

  it('a daily token budget: a warning at its share, a turn that crosses it mid-way finishes, the next prompt is refused before the engine with the budget and its reset, audited; others still run', async () => {
    const budgets = [{ who: '*', per: 'day' as const, tokens: 1500, warn: 0.5 }];
    stack = await startRestartable({ engine: 'claude', policy: new StaticPolicy(Policy.compile({ budgets })) });
    stack.fake!.setScenario({
      responses: [
        { text: 'Small.', usage: { input_tokens: 800, output_tokens: 10 } }, // 810 of 1500: past the 50% warning
        // One turn, two model calls: the budget is crossed after the first; the turn still runs its tool and ends.
        { text: 'Listing.', tool_use: { name: 'Glob', input: { pattern: '*' } }, usage: { input_tokens: 700, output_tokens: 10 } },
        { text: 'Finished anyway.', usage: { input_tokens: 700, output_tokens: 10 } },
        { text: 'For bob.', usage: { input_tokens: 100, output_tokens: 10 } },
      ],
    });
    const alice = await (await stack.client('ws', 'alice')).createSession({
      agent: 'builder',
      options: { cwd: stack.cwd },
    });
    const ia = alice[Symbol.asyncIterator]();
    const first = await turn(alice, ia, 'small one');
    expect(eventsOf<BudgetEvent>(first, 'budget').map((e) => [e.principal, e.state])).toEqual([['alice', 'warning']]);

    const crossing = await turn(alice, ia, 'big one');
    const result = (crossing.find(isResult) as unknown as { message: { is_error: boolean; result: string } }).message;
    expect(result).toMatchObject({ is_error: false, result: 'Finished anyway.' });
    const reached = eventsOf<BudgetEvent>(crossing, 'budget');
    // As the terminal client prints it, and as the web page notes it in the transcript.
    expect(describeEvent(reached[0])).toBe(`* alice: ${reached[0].message}`);
    const page = new Transcript();
    page.apply({ kind: 'event', seq: 1, event: reached[0] });
    expect(page.entries.at(-1)).toMatchObject({ kind: 'note', text: `alice: ${reached[0].message}`, tone: 'error' });
    expect(reached.map((e) => [e.state, e.budget])).toEqual([['reached', 'budgets[0] (who: *, per: day, tokens: 1500)']]);
    const midnight = new Date(new Date().setUTCHours(24, 0, 0, 0)).toISOString();
    expect(reached[0].resets_at).toBe(midnight);

    const calls = stack.fake!.modelRequests().length;
    const refusal = await rejectionOf(alice.sendUserMessage('NEVER_SENT_TEXT'));
    expect(refusal.code).toBe('RESOURCE_EXHAUSTED');
    expect(refusal.message).toBe(
      `over budget: budgets[0] (who: *, per: day, tokens: 1500) is spent (2230 of 1500 tokens); it resets at ${midnight}`,
    );
    expect(stack.fake!.modelRequests().length).toBe(calls);
    expect(stack.fake!.requests.some((r) => r.raw.includes('NEVER_SENT_TEXT'))).toBe(false);

    const audit = await stack.gateway.directory.audit.read({ session_id: alice.id });
    const refused = audit.entries.find((e) => e.action === 'prompt' && e.result === 'refused');
    expect(refused).toMatchObject({ principal: 'alice', code: 'RESOURCE_EXHAUSTED', reason: refusal.message, decided_by: 'tether:policy' });
    expect(audit.entries.filter((e) => e.action === 'budget').map((e) => [e.principal, e.state])).toEqual([
      ['alice', 'warning'],
      ['alice', 'reached'],
    ]);

    // "*" is each principal on their own: bob's prompt in the same session still runs.
    const bob = await (await stack.client('ws', 'bob')).attach(alice.id);
    const bobs = await turn(bob, ia, 'bob asks');
    expect(eventsOf<UsageEvent>(bobs, 'usage').map((e) => [e.principal, e.input_tokens])).toEqual([['bob', 100]]);
  }, 300_000);
});
