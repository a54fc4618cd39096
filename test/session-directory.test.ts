/**
 * The session directory as a value: its indexes are private and its methods keep them in
 * step. A session removed (released to another gateway, abandoned, dropped after it ended) is
 * gone from every index, its timer included, so a timer of an old copy never touches a later
 * one of the same id; a client removed is gone from both of its indexes.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../core/logging.js';
import { TetherError } from '../core/errors.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { SessionDirectory } from '../gateway/directory/session-directory.js';
import type { ProxiedClient } from '../gateway/directory/sessions-elsewhere.js';
import { ANONYMOUS, type Principal } from '../gateway/door/principal.js';
import { GATEWAY_DEFAULTS } from '../gateway/gateway.js';
import { Durability } from '../gateway/session/session.js';
import type { StoredSession } from '../gateway/session/session-store.js';
import { HeldStore } from './support/held-store.js';

const LOST_MS = 1_000;
const RETAIN_MS = 5_000;
const ID = 'sess-1';

/** A session as another gateway of the cluster left it in the store: waiting for its agent. */
const stored = (id = ID): StoredSession => ({
  record: { id, agent: 'builder', engine: 'demo', owner: 'alice', options: {}, created_at: new Date(0).toISOString() },
  frames: [],
  inputs: [],
  roles: {},
});

const alice: Principal = { sub: 'alice', kind: 'client', canCreate: true, canControl: true, canAdmin: false };

describe('the session directory', () => {
  let store: HeldStore;
  let dir: SessionDirectory;
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    store = new HeldStore();
    store.hold = false; // written at once: these tests are about the indexes
    dir = new SessionDirectory(
      { ...GATEWAY_DEFAULTS, agentLostTimeoutMs: LOST_MS, endedRetentionMs: RETAIN_MS },
      silentLogger,
      new MemoryAuditLog(),
      store,
      new Durability(store),
    );
  });
  afterEach(() => {
    dir.dispose();
    vi.useRealTimers();
  });

  const listed = () => dir.listSessions(ANONYMOUS).map((s) => s.id);

  it('a session released to another gateway is gone from every index, and its lost-agent timer no longer ends it', () => {
    dir.adopt(stored());
    const held = dir.get(ID)!;
    expect(held.currentState).toBe('agent-lost');
    expect(listed()).toEqual([ID]);
    expect(dir.release(ID)).toBe(held);
    expect(dir.get(ID)).toBeUndefined();
    expect(listed()).toEqual([]);
    expect(dir.sessionList()).toEqual([]);
    expect(() => dir.visible(ANONYMOUS, ID)).toThrow(TetherError);
    vi.advanceTimersByTime(LOST_MS * 2);
    expect(held.currentState).toBe('agent-lost'); // its engine runs on at the other gateway
    expect(dir.release(ID)).toBeUndefined(); // idempotent
  });

  it("an ended session released and later taken back is not dropped by the first copy's retention timer", () => {
    dir.adopt(stored());
    vi.advanceTimersByTime(LOST_MS); // its agent never came: ended, to be dropped RETAIN_MS later
    expect(dir.get(ID)!.ended).toBe(true);
    dir.release(ID);
    dir.adopt(stored()); // back here: a new copy, waiting for its agent again
    const again = dir.get(ID)!;
    vi.advanceTimersByTime(RETAIN_MS); // past the first copy's drop
    expect(dir.get(ID)).toBe(again);
    expect(store.dropped).toEqual([]);
    vi.advanceTimersByTime(LOST_MS + RETAIN_MS); // the new copy's own end and drop
    expect(again.ended).toBe(true);
    expect(dir.get(ID)).toBeUndefined();
    expect(store.dropped).toEqual([ID]);
  });

  it('an ended session stays listed for its retention, then is gone from the directory and the store', () => {
    dir.adopt(stored());
    vi.advanceTimersByTime(LOST_MS);
    expect(listed()).toEqual([ID]);
    vi.advanceTimersByTime(RETAIN_MS - 1);
    expect(listed()).toEqual([ID]);
    vi.advanceTimersByTime(1);
    expect(listed()).toEqual([]);
    expect(store.dropped).toEqual([ID]);
  });

  it('a session abandoned before its engine started is gone from every index and the store, audited as failed', () => {
    const s = dir.open(alice, 'builder', 'demo', {}, 'sess-new');
    expect(dir.liveSessionIdsOf('builder')).toEqual(['sess-new']);
    expect(dir.listSessions(ANONYMOUS).map((i) => i.id)).toEqual(['sess-new']);
    dir.abandon(s, 'test', new TetherError('UNAVAILABLE', 'no engine'));
    expect(dir.get('sess-new')).toBeUndefined();
    expect(dir.liveSessionIdsOf('builder')).toEqual([]);
    expect(listed()).toEqual([]);
    expect(s.ended).toBe(true);
    expect(store.dropped).toEqual(['sess-new']);
    vi.advanceTimersByTime(RETAIN_MS * 2);
    expect(store.dropped).toEqual(['sess-new']); // dropped once: its end scheduled nothing
  });

  it('a client added is known (control, cut) until removed, then gone from both its indexes', () => {
    const cut = vi.fn();
    const link: ProxiedClient = { clientId: 'c-1', principal: 'alice', transport: 'memory', sendFrame: () => {}, sendReply: () => {}, cut };
    dir.addClient('c-1', alice, link);
    dir.addClient('c-remote', { ...alice, canControl: false }); // another gateway's client: no link here
    expect(dir.clientCount).toBe(2);
    expect(dir.mayControl('c-1')).toBe(true);
    expect(dir.mayControl('c-remote')).toBe(false);
    dir.cutClient('c-1', 'moved');
    expect(cut).toHaveBeenCalledWith('moved');
    dir.removeClient('c-1');
    dir.removeClient('c-1'); // idempotent
    expect(dir.clientCount).toBe(1);
    expect(dir.mayControl('c-1')).toBe(false);
    dir.cutClient('c-1', 'again');
    expect(cut).toHaveBeenCalledTimes(1);
  });
});
