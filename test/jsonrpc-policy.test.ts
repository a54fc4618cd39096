/**
 * The central policy holds for JSON-RPC dialect clients too: a mode above the client's
 * ceiling asked through `set_permission_mode` is refused before it reaches the engine, exactly
 * as for a native client (the dialect's client edge goes through the same policy gate).
 */
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Policy } from '../core/policy/policy.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { startStack, withTimeout } from './support/stack.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { waitFor } from './support/wait.js';

describe('the JSON-RPC dialect under a policy', () => {
  const cleanups = cleanupsPerTest();

  it('set_permission_mode above the ceiling is refused naming the rule; within it, it goes through', async () => {
    const policy = new StaticPolicy(Policy.compile({ permissions: {}, maxPermissionMode: { '*': 'default', control: 'acceptEdits' } }));
    const stack = cleanups.own(await startStack({ engine: 'demo', policy }));
    const ws = new WebSocket(stack.wsUrl, 'tether-jsonrpc.v1', { headers: { authorization: `Bearer ${stack.token}` } });
    const answers = new Map<number, Record<string, any>>();
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as Record<string, any>;
      if (typeof m.id === 'number' && ('result' in m || 'error' in m)) answers.set(m.id, m);
    });
    await withTimeout(new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject)), 5_000, 'open');
    let next = 1;
    const call = async (method: string, params: Record<string, unknown>) => {
      const id = next++;
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      await waitFor(() => answers.has(id), 10_000, `the answer to ${method}`);
      return answers.get(id)!;
    };
    try {
      expect((await call('initialize', { protocol_version: '1.0', capabilities: ['streaming', 'permissions'] })).result).toBeDefined();
      const created = await call('session_create', { agent: 'test-agent' });
      const sessionId = created.result.session_id as string;
      const refused = await call('set_permission_mode', { session_id: sessionId, mode: 'bypassPermissions' });
      expect(refused.error?.message).toContain('maxPermissionMode.control = acceptEdits');
      const allowed = await call('set_permission_mode', { session_id: sessionId, mode: 'acceptEdits' });
      expect(allowed.error).toBeUndefined();
    } finally {
      ws.terminate();
    }
  }, 30_000);
});
