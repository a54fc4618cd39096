import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TetherEvent, type PresenceChange } from '../core/protocol/events.js';
import { compactMore, presenceChanges } from '../core/protocol/presence.js';
import { frameBuffer } from '../core/wire/session-frame.js';
import { describeEvent } from '../client/terminal-render.js';
import { tetherEvent } from '../core/protocol/events.js';
import {
  PresenceBatch,
  PRESENCE_MAX_CHANGES,
  PRESENCE_MAX_WAIT_MS,
  PRESENCE_WAIT_MS_PER_MEMBER,
} from '../gateway/session/presence-batch.js';
import { SessionHistory } from '../gateway/session/history/session-history.js';
import { Durability } from '../gateway/session/history/durability.js';
import { MemorySessionStore } from '../gateway/session/session-store.js';
import { REPLAY_DEFAULTS } from '../gateway/session/history/replay-log.js';
import type { RemoteSession } from '../client/remote-session.js';
import { startStack } from './support/stack.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { waitFor } from './support/wait.js';

/** What one frame says (the bytes every member gets), parsed. */
const paramsOf = (bytes: Buffer) => (JSON.parse(bytes.toString('utf8')) as { params: { seq: number; event?: TetherEvent } }).params;

/** A session history over the memory store, and every frame it handed to members. */
function historyWithBatch(members = 3) {
  const delivered: Buffer[] = [];
  const store = new MemorySessionStore();
  const history = new SessionHistory('s-1', store, new Durability(store), REPLAY_DEFAULTS, (bytes) => delivered.push(frameBuffer(bytes)));
  const batch = new PresenceBatch(
    (event) => history.append({ event }),
    () => members,
  );
  history.holdBack(batch);
  return { history, batch, delivered };
}

const change = (n: number, action: PresenceChange['action'] = 'attached'): PresenceChange => ({
  action,
  principal: `p${n}`,
  client_id: `c${n}`,
  role: 'viewer',
});

/** The window of a session of 3 members (historyWithBatch's default). */
const WINDOW_MS = 3 * PRESENCE_WAIT_MS_PER_MEMBER;

describe('presence coalescing (PresenceBatch)', () => {
  // The batch's clock and timer are fake: what is held, and what does not come later, do not
  // depend on how fast a loaded machine runs the test (a stall longer than the window once
  // flushed a change early, and a sleep only suggests that nothing more comes).
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a change after a quiet spell goes out at once; the rest of its burst become one event, in order, valid per the protocol schema', () => {
    const { batch, delivered } = historyWithBatch();
    for (let n = 1; n <= 5; n++) batch.add(change(n));
    expect(delivered).toHaveLength(1); // the first, as part of its own change
    expect(paramsOf(delivered[0]).event).not.toHaveProperty('more'); // a lone change carries no `more`
    vi.advanceTimersByTime(WINDOW_MS - 1);
    expect(delivered).toHaveLength(1); // held for the whole window
    vi.advanceTimersByTime(1);
    expect(delivered).toHaveLength(2);
    vi.advanceTimersByTime(PRESENCE_MAX_WAIT_MS);
    expect(delivered).toHaveLength(2); // and nothing after it
    const event = TetherEvent.parse(paramsOf(delivered[1]).event);
    expect(event.subtype).toBe('presence');
    expect(presenceChanges(event as Extract<TetherEvent, { subtype: 'presence' }>)).toEqual([2, 3, 4, 5].map((n) => change(n)));
  });

  it('held changes of a session being dropped are not appended later (its store entry is gone)', () => {
    const { batch, delivered } = historyWithBatch();
    batch.add(change(1)); // at once
    batch.add(change(2)); // held for the window
    batch.dispose();
    vi.advanceTimersByTime(PRESENCE_MAX_WAIT_MS); // far past the window of 3 members
    expect(delivered).toHaveLength(1);
  });

  it('`more` leaves out what an entry shares with the change before it, and presenceChanges restores it', () => {
    const { batch, delivered } = historyWithBatch();
    batch.add(change(9)); // opens the window: the next ones are held together
    const changes: PresenceChange[] = [
      change(1),
      change(2),
      { ...change(2), action: 'role_changed', role: 'controller' },
      { ...change(3), principal: 'p2' },
      { ...change(1), action: 'detached' },
    ];
    for (const c of changes) batch.add(c);
    expect(delivered).toHaveLength(1);
    vi.advanceTimersByTime(WINDOW_MS);
    expect(delivered).toHaveLength(2);
    const event = TetherEvent.parse(paramsOf(delivered[1]).event) as Extract<TetherEvent, { subtype: 'presence' }>;
    expect(event.more).toEqual([
      { client_id: 'c2', principal: 'p2' },
      { client_id: 'c2', action: 'role_changed', role: 'controller' },
      { client_id: 'c3', action: 'attached', role: 'viewer' },
      { client_id: 'c1', action: 'detached', principal: 'p1' },
    ]);
    expect(presenceChanges(event)).toEqual(changes);
  });

  it('a held change goes out before any other frame, so order is kept', () => {
    const { history, batch, delivered } = historyWithBatch();
    batch.add(change(1));
    batch.add(change(2)); // held: within the window of the first
    history.append({ event: tetherEvent({ subtype: 'state', state: 'running' }) });
    const frames = delivered.map(paramsOf);
    expect(frames.map((f) => [f.seq, f.event?.subtype, f.event?.subtype === 'presence' ? f.event.client_id : undefined])).toEqual([
      [1, 'presence', 'c1'],
      [2, 'presence', 'c2'],
      [3, 'state', undefined],
    ]);
  });

  it('the terminal names the first changes of a burst on one line and counts the rest', () => {
    const [first, ...rest] = [1, 2, 3, 4, 5, 6, 7].map((n) => change(n));
    const event = tetherEvent({ subtype: 'presence', ...first, more: compactMore(first, rest) });
    expect(describeEvent(event)).toBe(
      '* p1 attached (viewer), p2 attached (viewer), p3 attached (viewer), p4 attached (viewer), p5 attached (viewer) and 2 more',
    );
    expect(describeEvent(tetherEvent({ subtype: 'presence', ...change(1), action: 'role_changed', role: 'controller' }))).toBe(
      '* p1 is now controller',
    );
    // A display name from the identity provider is shown with the stable subject beside it.
    expect(describeEvent(tetherEvent({ subtype: 'presence', ...change(1), name: 'Bob Brown' }))).toBe('* Bob Brown (p1) attached (viewer)');
    expect(describeEvent(tetherEvent({ subtype: 'presence', ...change(1), name: 'p1' }))).toBe('* p1 attached (viewer)');
  });

  it('a burst larger than one event holds goes out in events of at most PRESENCE_MAX_CHANGES', () => {
    const { batch, delivered } = historyWithBatch();
    for (let n = 0; n <= PRESENCE_MAX_CHANGES + 1; n++) batch.add(change(n));
    expect(delivered).toHaveLength(2); // change 0 at once, then a full event
    expect(presenceChanges(paramsOf(delivered[1]).event as Extract<TetherEvent, { subtype: 'presence' }>)).toHaveLength(
      PRESENCE_MAX_CHANGES,
    );
    batch.flush();
    expect(presenceChanges(paramsOf(delivered[2]).event as Extract<TetherEvent, { subtype: 'presence' }>)).toEqual([
      change(PRESENCE_MAX_CHANGES + 1),
    ]);
  });
});

/** Every presence event a session's reader gets, collected in the background. */
function collectPresence(s: RemoteSession): Extract<TetherEvent, { subtype: 'presence' }>[] {
  const got: Extract<TetherEvent, { subtype: 'presence' }>[] = [];
  void (async () => {
    for await (const item of s) if (item.kind === 'event' && item.event.subtype === 'presence') got.push(item.event);
  })().catch(() => {});
  return got;
}

/** The member list a client keeps: everyone at its start (members()), then each presence change applied in order. */
function membersFrom(start: { client_id: string }[], events: Extract<TetherEvent, { subtype: 'presence' }>[]): string[] {
  const ids = new Set(start.map((c) => c.client_id));
  for (const e of events) for (const c of presenceChanges(e)) c.action === 'detached' ? ids.delete(c.client_id) : ids.add(c.client_id);
  return [...ids].sort();
}

describe('presence coalescing (gateway, real sockets)', () => {
  const cleanups = cleanupsPerTest();
  const N = 100;

  it(`${N} viewers attaching at once cost O(N) presence frames, not N²/2, and every member list converges`, async () => {
    // N hellos at once from one address each hold a failure reservation until their token is checked
    // (door-limits.ts: concurrent bad ones cannot overrun the burst); on a busy machine more than the
    // default burst of 40 are in flight together, so good tokens would be refused (429).
    const stack = cleanups.own(
      await startStack({ engine: 'demo', limits: { maxMembers: 2 * N }, doorLimits: { authFailureBurst: 2 * N } }),
    );
    const owner = await (await stack.client()).createSession({ agent: 'test-agent' });
    const ownerEvents = collectPresence(owner);
    const clients = await Promise.all(Array.from({ length: N }, () => stack.client()));
    // The burst: every attach sent at once.
    const viewers = await Promise.all(clients.map((c) => c.attach(owner.id, { readOnly: true })));
    const events = viewers.map(collectPresence);
    // An attach answer lists the first few members; each asks for everyone (session.info), as our clients do.
    const starts = await Promise.all(viewers.map((v) => v.members()));
    const all = [owner.clientId, ...viewers.map((v) => v.clientId)].sort();
    const lists = () => [membersFrom(owner.info.clients, ownerEvents), ...viewers.map((_v, n) => membersFrom(starts[n], events[n]))];
    await waitFor(() => lists().every((l) => l.length === all.length), 20_000, 'every member list to hold all members');
    for (const l of lists()) expect(l).toEqual(all);
    // One presence event per attach to every member would be N²/2 (≈5,000) frames; coalesced,
    // a session of M members sends at most one per M ms, so the burst costs about N + its duration in ms.
    const frames = ownerEvents.length + events.reduce((sum, e) => sum + e.length, 0);
    expect(frames).toBeLessThanOrEqual(8 * N);
    // Replay gives the same list: a client attaching from seq 1 rebuilds it from the history alone.
    const late = await (await stack.client()).attach(owner.id, { fromSeq: 1, readOnly: true });
    const lateEvents = collectPresence(late);
    await waitFor(() => membersFrom([], lateEvents).length === all.length + 1, 10_000, 'the late client to see everyone, itself last');
    expect(membersFrom([], lateEvents)).toEqual([...all, late.clientId].sort());
  });
});

describe('presence names (identity provider display names)', () => {
  it("a coalesced event keeps each change's name, and a name never carries over to another principal", () => {
    const changes: PresenceChange[] = [
      { action: 'attached', principal: 'bob', client_id: 'c1', role: 'viewer', name: 'Bob Brown' },
      { action: 'role_changed', principal: 'bob', client_id: 'c1', role: 'controller', name: 'Bob Brown' },
      { action: 'attached', principal: 'carol', client_id: 'c2', role: 'viewer' },
      { action: 'attached', principal: 'dana', client_id: 'c3', role: 'viewer', name: 'Dana Day' },
    ];
    const [first, ...rest] = changes;
    const more = compactMore(first, rest);
    expect(more[0]).not.toHaveProperty('name'); // same principal, same name: left out
    expect(presenceChanges({ ...first, more })).toEqual(changes);
  });
});
