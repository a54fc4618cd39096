/**
 * Issue 32, a long absence: an agent away for hours (a laptop asleep, an outage) keeps its
 * sessions at the gateway with their queued prompts, for `limits.agentLostTimeoutMs` (24 h by
 * default); when it comes back without the engine, the engine is resumed and the prompts run,
 * each once. On a fake clock, over the directory with a stand-in agent link.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../core/logging.js';
import type { TetherEvent } from '../core/protocol/events.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import type { AgentLink } from '../gateway/directory/agent-link.js';
import { SessionDirectory } from '../gateway/directory/session-directory.js';
import { ANONYMOUS } from '../gateway/door/principal.js';
import { AGENT_AWAY_DEFAULT_MS, GATEWAY_DEFAULTS } from '../gateway/gateway.js';
import { Durability } from '../gateway/session/session.js';
import type { StoredSession } from '../gateway/session/session-store.js';
import { HeldStore } from './support/held-store.js';

const ID = 'sess-away';
const HOUR = 3_600_000;
const prompt = {
  type: 'user',
  message: { role: 'user', content: 'sent while the agent was away' },
  parent_tool_use_id: null,
  session_id: 'default',
};

/** The session as the store holds it, waiting for its agent. */
const stored = (): StoredSession => ({
  record: { id: ID, agent: 'builder', engine: 'demo', owner: 'alice', options: { cwd: '/work' }, created_at: new Date(0).toISOString() },
  frames: [],
  inputs: [],
  roles: {},
});

/** A member that drops what it is sent (the test reads the store). */
const alice = { clientId: 'c-alice', principal: 'alice', transport: 'memory', sendFrame: () => {}, sendReply: () => {} };

/** The part of an agent link the directory uses, with what the gateway asked of it recorded. */
function standInLink(running: string[] = []) {
  const spawned: unknown[][] = [];
  const inputs: { seq: number; line: Record<string, unknown> }[] = [];
  const link = {
    name: 'builder',
    principal: { sub: 'builder' },
    descriptor: { name: 'builder', sessions: running.map((id) => ({ session_id: id, next_seq: 1, last_input_seq: 0 })) },
    spawn: async (...args: unknown[]) => {
      spawned.push(args);
      return { pid: 4242, engine: 'demo' };
    },
    input: (_id: string, seq: number, line: Record<string, unknown>) => inputs.push({ seq, line }),
    stop: async () => {},
    dispose: () => {},
  };
  return { link: link as unknown as AgentLink, spawned, inputs };
}

describe('an agent away for a long time (fake clock)', () => {
  let store: HeldStore;
  let dir: SessionDirectory;
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    store = new HeldStore();
    store.hold = false;
    dir = new SessionDirectory({ ...GATEWAY_DEFAULTS }, silentLogger, new MemoryAuditLog(), store, new Durability(store));
  });
  afterEach(() => {
    dir.dispose();
    vi.useRealTimers();
  });

  const events = () =>
    store.frames
      .filter((f) => f.sessionId === ID)
      .flatMap((f) => {
        const event = (JSON.parse(Buffer.from(f.frame.bytes as Uint8Array).toString('utf8')) as { params: { event?: TetherEvent } }).params
          .event;
        return event ? [event] : [];
      });

  it('keeps the session and a prompt sent meanwhile for 23 h; back without its engine, the engine is resumed and the prompt runs once', async () => {
    expect(GATEWAY_DEFAULTS.agentLostTimeoutMs).toBe(AGENT_AWAY_DEFAULT_MS);
    expect(AGENT_AWAY_DEFAULT_MS).toBe(24 * HOUR);
    dir.adopt(stored());
    const s = dir.get(ID)!;
    const before = standInLink([ID]);
    dir.agentUp(before.link);
    // One turn: the engine's system/init names its session id, which --resume takes later.
    s.onEngineLine(1, Buffer.from(JSON.stringify({ type: 'system', subtype: 'init', session_id: 'engine-1' })), {
      type: 'system',
      subtype: 'init',
      engine_session_id: 'engine-1',
    });
    s.onEngineLine(2, Buffer.from(JSON.stringify({ type: 'result', subtype: 'success', is_error: false })), {
      type: 'result',
      subtype: 'success',
      is_error: false,
    });
    expect(s.currentState).toBe('idle');

    dir.agentDown(before.link); // the laptop goes to sleep
    const since = new Date().toISOString();
    s.attach(alice, 'owner');
    expect(s.input(alice.clientId, 'p1', prompt)).toBe('applied'); // queued at the gateway
    expect(dir.listSessions(ANONYMOUS)).toMatchObject([{ id: ID, state: 'agent-lost', agent_away_since: since, queued_inputs: 1 }]);

    vi.advanceTimersByTime(23 * HOUR);
    expect(s.currentState).toBe('agent-lost');

    const { link, spawned, inputs } = standInLink();
    dir.agentUp(link);
    await vi.waitFor(() => expect(s.currentState).toBe('idle'), { timeout: 2_000 });
    expect(spawned).toEqual([
      [ID, 'demo', { cwd: '/work', resume: 'engine-1' }, { hook: false, roots: undefined }, { next_seq: 3, last_input_seq: 0 }],
    ]);
    expect(inputs).toEqual([{ seq: 1, line: { ...prompt, uuid: expect.any(String), origin: { kind: 'human' } } }]); // stamped with its author's turn (turn-authors.ts)
    expect(before.inputs).toEqual([]); // never sent to the link that was gone
    const resumed = events().find((e) => e.subtype === 'engine_resumed');
    expect(resumed).toMatchObject({ interrupted_turn: false, resent_inputs: 1 });
    expect((resumed as { gap_ms: number }).gap_ms - 23 * HOUR).toBeGreaterThanOrEqual(0); // and the few ms of waiting for it
    expect((resumed as { gap_ms: number }).gap_ms - 23 * HOUR).toBeLessThan(1_000);
    expect(dir.listSessions(ANONYMOUS)[0].agent_away_since).toBeUndefined();
    vi.advanceTimersByTime(2 * HOUR); // the away timer was cleared: nothing ends it
    expect(s.currentState).toBe('idle');
  });

  it('past the setting the session ends, the reason saying how long it waited', () => {
    dir.adopt(stored());
    const s = dir.get(ID)!;
    vi.advanceTimersByTime(AGENT_AWAY_DEFAULT_MS - 1);
    expect(s.currentState).toBe('agent-lost');
    vi.advanceTimersByTime(1);
    expect(s.ended).toBe(true);
    expect(events().find((e) => e.subtype === 'exited')).toMatchObject({
      reason: expect.stringContaining('the agent was away longer than the gateway keeps a session waiting (86400000 ms'),
    });
  });
});
