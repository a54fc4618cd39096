import { describe, expect, it } from 'vitest';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import type { TetherEvent } from '../core/protocol/events.js';
import type { FakeResponse } from './support/fake-anthropic.js';
import { startRig, type EngineRig } from './support/engines.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { isResult, rejectionOf, until } from './support/items.js';
import type { TransportName } from './support/stack.js';
import { waitFor } from './support/wait.js';

/**
 * Team turns, the queue (issue #31): prompts sent while a turn runs wait in a queue every
 * member sees, with authors, in the order they will run; their author or the owner can
 * withdraw one before it starts; a steer cuts into the running turn; a stop can clear the
 * queue. The real CLI with the scripted model, which records every request it receives.
 */

/** A slow answer: the turn still runs while the test sends more. */
const SLOW: FakeResponse = { text: 'one two three four five six seven eight nine ten eleven twelve', chunk_delay_ms: 200 };

type QueuedEvent = Extract<TetherEvent, { subtype: 'queued' }>;
type Interrupted = Extract<TetherEvent, { subtype: 'interrupt' }>;
const queuedEvent = (match: (e: QueuedEvent) => boolean) => (i: SessionItem) =>
  i.kind === 'event' && i.event.subtype === 'queued' && match(i.event);
const eventOf = (i: SessionItem) => (i as { event: QueuedEvent }).event;
const resultFor = (uuid: string) => (i: SessionItem) =>
  isResult(i) && ((i as { message: { user_message_uuids?: string[] } }).message.user_message_uuids ?? []).includes(uuid);
const texts = (e: QueuedEvent) => e.prompts.map((p) => [p.principal, (p.message as { content: string }).content]);

describe.each([
  { client: 'ws', agent: 'ws' },
  { client: 'grpc', agent: 'grpc' },
] as { client: TransportName; agent: TransportName }[])('queued prompts (client $client, agent $agent)', (t) => {
  const cleanups = cleanupsPerTest();

  /** A session of the owner (test-user) with bob and carol attached as controllers, and a turn running. */
  async function teamMidTurn(responses: FakeResponse[]): Promise<{
    rig: EngineRig;
    owner: RemoteSession;
    bob: RemoteSession;
    carol: RemoteSession;
    its: AsyncIterator<SessionItem>[];
    seen: SessionItem[][];
  }> {
    const rig = cleanups.own(
      await startRig('claude', { responses, fallback: { text: 'OK.' } }, { clientTransport: t.client, agentTransport: t.agent }),
    );
    const owner = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(owner.id);
    const carol = await (await rig.stack.client({ sub: 'carol' })).attach(owner.id);
    expect([bob.role, carol.role]).toEqual(['controller', 'controller']);
    const its = [owner, bob, carol].map((s) => s[Symbol.asyncIterator]());
    await owner.send('first prompt');
    await waitFor(() => rig.fake!.textDeltasSent() > 0, 30_000, 'the first answer to stream');
    return { rig, owner, bob, carol, its, seen: [[], [], []] };
  }
  const reachedModel = (rig: EngineRig, text: string) => rig.fake!.requests.some((r) => r.raw.includes(text));

  it('two prompts sent mid-turn by two people queue in order for every member; a third member may not withdraw one; its author does, and it never reaches the model; the other runs next', async () => {
    const { rig, owner, bob, carol, its, seen } = await teamMidTurn([SLOW, { text: 'queue answered' }]);
    const b = await bob.send('BOB_QUEUED');
    const c = await carol.send('CAROL_QUEUED');
    const both = await Promise.all(
      its.map((it, n) =>
        until(
          it,
          queuedEvent((e) => e.prompts.length === 2),
          seen[n],
          20_000,
          'both prompts queued',
        ),
      ),
    );
    for (const item of both)
      expect(texts(eventOf(item))).toEqual([
        ['bob', 'BOB_QUEUED'],
        ['carol', 'CAROL_QUEUED'],
      ]);
    expect(eventOf(both[0]).prompts.map((p) => [p.uuid, p.priority])).toEqual([
      [b.uuid, 'later'],
      [c.uuid, 'later'],
    ]);
    expect(owner.queued().map((p) => p.uuid)).toEqual([b.uuid, c.uuid]);
    // The prompt events say they were queued, so no client shows them in the transcript yet.
    const promptEvent = seen[0].find((i) => i.kind === 'event' && i.event.subtype === 'prompt' && i.event.uuid === b.uuid);
    expect(promptEvent).toMatchObject({ event: { principal: 'bob', queued: true, priority: 'later' } });

    // Carol is neither the author nor the owner: refused, with the reason; nor may she cancel it herself.
    const refused = await rejectionOf(carol.withdraw(b.uuid));
    expect(refused.code).toBe('PERMISSION_DENIED');
    expect(refused.message).toContain("only its author (bob) or the session's owner");
    const raw = await rejectionOf(carol.request('cancel_async_message', { message_uuid: b.uuid }));
    expect(raw.code).toBe('PERMISSION_DENIED');
    expect(raw.message).toContain('session.withdraw_prompt');

    await bob.withdraw(b.uuid);
    const withdrawn = await Promise.all(
      its.map((it, n) =>
        until(
          it,
          queuedEvent((e) => e.change.action === 'withdrawn'),
          seen[n],
          20_000,
          'the withdrawal',
        ),
      ),
    );
    for (const item of withdrawn) {
      expect(eventOf(item).change).toMatchObject({ uuids: [b.uuid], by: 'bob' });
      expect(texts(eventOf(item))).toEqual([['carol', 'CAROL_QUEUED']]);
    }
    // Carol's starts when the first turn ends: every member sees it leave the queue, then its answer.
    const started = await Promise.all(
      its.map((it, n) =>
        until(
          it,
          queuedEvent((e) => e.change.action === 'started'),
          seen[n],
          30_000,
          "carol's prompt to start",
        ),
      ),
    );
    for (const item of started)
      expect(eventOf(item)).toMatchObject({ prompts: [], change: { uuids: [c.uuid], by: 'carol', folded: false } });
    await until(its[0], resultFor(c.uuid), seen[0], 30_000, "carol's turn");
    expect(reachedModel(rig, 'CAROL_QUEUED')).toBe(true);
    expect(reachedModel(rig, 'BOB_QUEUED')).toBe(false);
    expect(rig.fake!.modelRequests().at(-1)!.raw).toContain('CAROL_QUEUED');
    // Once started, it can no longer be withdrawn.
    expect((await rejectionOf(carol.withdraw(c.uuid))).code).toBe('FAILED_PRECONDITION');

    const audit = (await owner.audit()).filter((e) => e.action === 'prompt_withdrawn');
    expect(audit.map((e) => [e.principal, e.result ?? 'ok', e.uuid])).toEqual([
      ['carol', 'refused', b.uuid],
      ['bob', 'ok', b.uuid],
      ['carol', 'refused', c.uuid],
    ]);
  }, 120_000);

  it('a member who attaches later reads the queue from history; a viewer sees it and cannot withdraw; a bad priority is refused', async () => {
    const { rig, owner, bob } = await teamMidTurn([SLOW]);
    const b = await bob.send('BOB_QUEUED');
    expect((await rejectionOf(bob.send('bad', { priority: 'soon' as 'now' }))).code).toBe('INVALID_ARGUMENT');
    const viewer = await (await rig.stack.client({ sub: 'vera' })).attach(owner.id, { readOnly: true });
    const late = await (await rig.stack.client({ sub: 'dave' })).attach(owner.id);
    for (const s of [viewer, late]) {
      await until(
        s[Symbol.asyncIterator](),
        queuedEvent((e) => e.prompts.length === 1),
        [],
        20_000,
        'the queue from history',
      );
      expect(s.queued().map((p) => [p.uuid, p.principal])).toEqual([[b.uuid, 'bob']]);
    }
    const refused = await rejectionOf(viewer.withdraw(b.uuid));
    expect(refused.code).toBe('PERMISSION_DENIED');
    expect(refused.message).toContain('viewer');
  }, 120_000);

  it('a steer (priority now) cuts into the running turn at once, and every member sees where and by whom', async () => {
    const { rig, bob, its, seen } = await teamMidTurn([SLOW, { text: 'steered answer' }]);
    const steer = await bob.send('STEER_TEXT', { priority: 'now' });
    const started = await until(
      its[2],
      queuedEvent((e) => e.change.action === 'started'),
      seen[2],
      30_000,
      'the steer to start',
    );
    expect(eventOf(started).change).toEqual({ action: 'started', uuids: [steer.uuid], by: 'bob', steer: true });
    const result = await until(its[2], resultFor(steer.uuid), seen[2], 30_000, 'the steered turn');
    expect((result as { message: Record<string, unknown> }).message.user_message_uuids).toEqual([steer.uuid]);
    // Where: the steer's start (steer: true) marks it in every member's stream, checked above; what
    // the first turn had said when it was cut is in the steered turn's history, checked below.
    // (Whether and where members see the cut answer depends on when the engine writes it.)
    const request = rig.fake!.modelRequests().at(-1)!;
    expect(request.raw).toContain('STEER_TEXT');
    expect(request.raw).toContain('one'); // the cut answer is in the steered turn's history
  }, 120_000);

  it("the owner withdraws a member's prompt; a stop that clears the queue says how many it cleared, and nothing queued runs", async () => {
    const { rig, owner, bob, its, seen } = await teamMidTurn([SLOW, { text: 'after the stop' }]);
    const one = await bob.send('CLEARED_ONE');
    const two = await bob.send('WITHDRAWN_BY_OWNER');
    const three = await bob.send('CLEARED_TWO', { priority: 'next' });
    const queued = await until(
      its[0],
      queuedEvent((e) => e.prompts.length === 3),
      seen[0],
      20_000,
      'three queued',
    );
    expect(eventOf(queued).prompts.map((p) => p.uuid)).toEqual([three.uuid, one.uuid, two.uuid]); // next before later, as the engine runs them
    await owner.withdraw(two.uuid);
    await until(
      its[1],
      queuedEvent((e) => e.change.action === 'withdrawn'),
      seen[1],
      20_000,
      "the owner's withdrawal",
    );
    expect(eventOf(seen[1].at(-1)!).change.by).toBe('test-user');

    await owner.interrupt({ clearQueue: true });
    const stopped = await until(its[1], (i) => i.kind === 'event' && i.event.subtype === 'interrupt', seen[1], 20_000, 'the stop');
    expect((stopped as { event: Interrupted }).event).toMatchObject({ principal: 'test-user', cleared: 2 });
    const cleared = seen[1].find(queuedEvent((e) => e.change.action === 'cleared'));
    expect(cleared && eventOf(cleared)).toMatchObject({ prompts: [], change: { uuids: [three.uuid, one.uuid], by: 'test-user' } });
    await until(its[1], isResult, seen[1], 30_000, "the stopped turn's result");
    // Nothing queued ran: the next prompt's request is the next the model gets.
    const requests = rig.fake!.modelRequests().length;
    const after = await owner.send('after the stop');
    await until(its[1], resultFor(after.uuid), seen[1], 30_000, 'the next turn');
    expect(rig.fake!.modelRequests().length).toBe(requests + 1);
    for (const text of ['CLEARED_ONE', 'CLEARED_TWO', 'WITHDRAWN_BY_OWNER']) expect(reachedModel(rig, text)).toBe(false);
    expect(bob.queued()).toEqual([]);
  }, 120_000);
});
