import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { Policy } from '../core/policy/policy.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { startRig, type EngineRig } from './support/engines.js';
import { rejectionOf } from './support/items.js';
import { readTurn } from './support/turns.js';
import { withTimeout } from './support/wait.js';

/**
 * Issue 27, item 2, through the other door, with the real CLI: a controller may register its
 * own callback hooks (initialize `hooks` with callback ids, as the Agent SDK does), and a
 * PreToolUse hook's answer may carry `updatedInput` (the tool then runs with it) just as a
 * permission answer may. That answer is checked against the policy the same way. The policy
 * denies `Bash(rm *)` and keeps everyone at or below the `default` mode.
 */

describe("answers to a client's own hook callbacks are checked", () => {
  let rig: EngineRig;
  const audit = new MemoryAuditLog();
  beforeAll(async () => {
    rig = await startRig(
      'claude',
      { responses: [] },
      { audit, policy: new StaticPolicy(Policy.compile({ permissions: { deny: ['Bash(rm *)'] }, maxPermissionMode: { '*': 'default' } })) },
    );
  });
  afterAll(() => rig?.stop());

  /** Reads until the engine calls the client's hook `id`; `asked` gets the request ids of permission prompts passed on the way. */
  async function hookCall(items: AsyncIterator<SessionItem>, id: string, asked: string[] = []): Promise<Record<string, unknown>> {
    return withTimeout(
      (async () => {
        for (;;) {
          const next = await items.next();
          if (next.done) throw new Error('session ended before the hook callback');
          const m = next.value.kind === 'engine' ? next.value.message : undefined;
          const request = m?.type === 'control_request' ? (m.request as Record<string, unknown>) : undefined;
          if (request?.subtype === 'can_use_tool') asked.push(m!.request_id as string);
          if (request?.subtype === 'hook_callback' && request.callback_id === id) return m!;
        }
      })(),
      30_000,
      'the hook callback',
    );
  }

  const hookAnswer = (session: RemoteSession, requestId: string, output: Record<string, unknown>) =>
    session.send({
      type: 'control_response',
      response: { subtype: 'success', request_id: requestId, response: { hookSpecificOutput: { hookEventName: 'PreToolUse', ...output } } },
    });

  it('a PreToolUse answer whose updatedInput the policy denies is refused naming the rule; the file survives; the callback stays answerable', async () => {
    writeFileSync(join(rig.cwd, 'keep.txt'), 'precious');
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    await session.request('initialize', { hooks: { PreToolUse: [{ matcher: 'Bash', hookCallbackIds: ['mine'] }] } });
    rig.fake!.setScenario({
      responses: [
        {
          text: 'Writing.',
          tool_use: { id: 'toolu_hook', name: 'Bash', input: { command: 'echo hi > hooked.txt', description: 'write' } },
        },
        { text: 'Done.' },
      ],
    });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('make a file');
    const call = await hookCall(items, 'mine');
    const requestId = call.request_id as string;

    const err = await rejectionOf(
      hookAnswer(session, requestId, { permissionDecision: 'allow', updatedInput: { command: 'rm -f keep.txt', description: 'write' } }),
    );
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toContain('policy rule: Bash(rm *)');
    await hookAnswer(session, requestId, { permissionDecision: 'allow' }); // still open; runs as asked
    await readTurn(session, () => ({ behavior: 'allow', updatedInput: { command: 'echo hi > hooked.txt', description: 'write' } }), items);
    expect(existsSync(join(rig.cwd, 'keep.txt'))).toBe(true);
    expect(existsSync(join(rig.cwd, 'hooked.txt'))).toBe(true);
    const refused = (await audit.read({ action: 'permission_decision', session_id: session.id })).entries.filter(
      (r) => r.result === 'refused',
    );
    expect(refused).toEqual([
      expect.objectContaining({
        request_id: requestId,
        code: 'PERMISSION_DENIED',
        updated_input: { command: 'rm -f keep.txt', description: 'write' },
      }),
    ]);
    await session.stop();
  });

  it("a PermissionRequest answer's setMode above the answerer's ceiling is refused naming the rule, as in a permission answer", async () => {
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent', options: { cwd: rig.cwd } });
    await session.request('initialize', { hooks: { PermissionRequest: [{ hookCallbackIds: ['pr'] }] } });
    rig.fake!.setScenario({
      responses: [
        { text: 'Writing.', tool_use: { id: 'toolu_mode', name: 'Write', input: { file_path: join(rig.cwd, 'mode.txt'), content: 'x' } } },
        { text: 'Done.' },
      ],
    });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('write a file');
    const asked: string[] = [];
    const call = await hookCall(items, 'pr', asked);
    const suggested = (
      (call.request as { input: { permission_suggestions?: Record<string, unknown>[] } }).input.permission_suggestions ?? []
    ).filter((s) => s.type === 'setMode');
    expect(suggested).toEqual([expect.objectContaining({ mode: 'acceptEdits' })]); // the engine's own proposal

    const decide = (decision: Record<string, unknown>) =>
      session.send({
        type: 'control_response',
        response: {
          subtype: 'success',
          request_id: call.request_id,
          response: { hookSpecificOutput: { hookEventName: 'PermissionRequest', decision } },
        },
      });
    const err = await rejectionOf(decide({ behavior: 'allow', updatedPermissions: suggested }));
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toContain('maxPermissionMode');
    await decide({ behavior: 'deny', message: 'not now' }); // still open
    for (const id of asked) await session.answer(id, { behavior: 'deny', message: 'not now' }).catch(() => {}); // withdrawn or still open
    await readTurn(session, () => ({ behavior: 'deny', message: 'not now' }), items);
    await session.stop();
  });
});
