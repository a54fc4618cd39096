/**
 * Issue 32: what a session's history tells a restarted gateway (or another of a cluster) about
 * the session's life beyond its record: the agent it moved to and its folder (`moved`), its owner
 * now (`owner_changed`), and the engine's session id that `--resume` takes (`system/init`).
 * Issue 34: its git worktree as the agent last reported it (`worktree`), so a kept one stays listed.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../core/logging.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { SessionDirectory } from '../gateway/directory/session-directory.js';
import { GATEWAY_DEFAULTS } from '../gateway/gateway.js';
import { Durability } from '../gateway/session/session.js';
import type { StoredFrame } from '../gateway/session/session-store.js';
import { HeldStore } from './support/held-store.js';

const ID = 'sess-facts';
const frame = (seq: number, params: Record<string, unknown>): StoredFrame => ({
  seq,
  bytes: Buffer.from(JSON.stringify({ method: 'session.frame', params: { session_id: ID, seq, ...params } })),
});
const at = new Date(0).toISOString();
const worktree = {
  path: '/b/.tether-worktrees/x',
  branch: 'tether/x',
  base: 'abc',
  repository: '/b',
  state: 'kept' as const,
  reason: '1 changed or untracked file',
};

describe('a session read back from the store', () => {
  it('runs on the agent it moved to, in its folder, owned by whom it was handed to, resuming the engine it last had', () => {
    const store = new HeldStore();
    store.hold = false;
    const dir = new SessionDirectory({ ...GATEWAY_DEFAULTS }, silentLogger, new MemoryAuditLog(), store, new Durability(store));
    try {
      dir.adopt({
        record: { id: ID, agent: 'alpha', engine: 'claude', owner: 'alice', options: { cwd: '/a', model: 'm' }, created_at: at },
        frames: [
          frame(1, { origin: 'engine', message: { type: 'system', subtype: 'init', session_id: '0b5c2d1e-0000-4000-8000-000000000001' } }),
          frame(2, {
            origin: 'gateway',
            event: { type: 'tether', subtype: 'moved', from_agent: 'alpha', to_agent: 'beta', cwd: '/b', moved_by: 'alice', at },
          }),
          frame(3, { origin: 'gateway', event: { type: 'tether', subtype: 'owner_changed', owner: 'bob', previous_owner: 'alice', at } }),
          frame(4, { origin: 'gateway', event: { type: 'tether', subtype: 'worktree', worktree: { ...worktree, state: 'active' }, at } }),
          frame(5, { origin: 'gateway', event: { type: 'tether', subtype: 'worktree', worktree, at } }),
        ],
        inputs: [],
        roles: {},
      });
      const s = dir.get(ID)!;
      expect({ agent: s.agent, owner: s.owner, options: s.options }).toEqual({
        agent: 'beta',
        owner: 'bob',
        options: { cwd: '/b', model: 'm' },
      });
      expect(s.continuation()).toEqual({ engineSessionId: '0b5c2d1e-0000-4000-8000-000000000001', nextSeq: 1, lastInputSeq: 0 });
      expect(dir.liveSessionIdsOf('beta')).toEqual([ID]);
      expect(dir.liveSessionIdsOf('alpha')).toEqual([]);
      expect(s.info().worktree).toEqual(worktree); // the last report: kept, with its reason
    } finally {
      dir.dispose();
    }
  });
});
