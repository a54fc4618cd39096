import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPermissionRequest, type PermissionRequest } from '../client/permission-policy.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { Policy } from '../core/policy/policy.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { startRig, type EngineRig } from './support/engines.js';
import type { FakeScenario } from './support/fake-anthropic.js';
import { rejectionOf } from './support/items.js';
import { readTurn } from './support/turns.js';
import { withTimeout } from './support/wait.js';

/**
 * Issue 27, item 2, with the real CLI: a controller's answer to a permission prompt is a
 * decision about the call it was shown, not a way around the policy (updatedInput) or into
 * the agent user's settings files (updatedPermissions). The policy denies `Bash(rm *)`.
 */

const echoTurn = (id: string, command: string): FakeScenario => ({
  responses: [{ text: 'Writing.', tool_use: { id, name: 'Bash', input: { command, description: 'write' } } }, { text: 'Done.' }],
});

describe('answers to permission prompts are checked', () => {
  let rig: EngineRig;
  const audit = new MemoryAuditLog();
  beforeAll(async () => {
    rig = await startRig(
      'claude',
      { responses: [] },
      { audit, policy: new StaticPolicy(Policy.compile({ permissions: { deny: ['Bash(rm *)'] } })) },
    );
  });
  afterAll(() => rig?.stop());

  /** Sends a prompt and reads until the engine's first permission prompt. */
  async function firstPrompt(
    session: RemoteSession,
    scenario: FakeScenario,
  ): Promise<{ ask: PermissionRequest; items: AsyncIterator<SessionItem> }> {
    rig.fake!.setScenario(scenario);
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('make a file');
    const ask = await withTimeout(
      (async () => {
        for (;;) {
          const next = await items.next();
          if (next.done) throw new Error('session ended before a prompt');
          const ask = next.value.kind === 'engine' ? asPermissionRequest(next.value.message) : undefined;
          if (ask) return ask;
        }
      })(),
      30_000,
      'the permission prompt',
    );
    return { ask, items };
  }

  const decisions = async (sessionId: string) => (await audit.read({ action: 'permission_decision', session_id: sessionId })).entries;

  it('an updatedInput the policy denies is refused naming the rule; the file survives; the prompt stays answerable; the audit records both', async () => {
    writeFileSync(join(rig.cwd, 'keep.txt'), 'precious');
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const { ask, items } = await firstPrompt(session, echoTurn('toolu_swap', 'echo hi > made.txt'));
    const err = await rejectionOf(
      session.answer(ask.requestId, { behavior: 'allow', updatedInput: { command: 'rm -f keep.txt', description: 'write' } }),
    );
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toContain('policy rule: Bash(rm *)');
    await session.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }); // still open
    await readTurn(session, () => undefined, items);
    expect(existsSync(join(rig.cwd, 'keep.txt'))).toBe(true);
    expect(existsSync(join(rig.cwd, 'made.txt'))).toBe(true);
    expect(rig.fake!.lastToolResults().find((r) => r.tool_use_id === 'toolu_swap')?.is_error).toBe(false);
    expect(await decisions(session.id)).toEqual([
      expect.objectContaining({
        request_id: ask.requestId,
        result: 'refused',
        code: 'PERMISSION_DENIED',
        updated_input: { command: 'rm -f keep.txt', description: 'write' },
        decided_by: 'tether:policy',
      }),
      expect.objectContaining({ request_id: ask.requestId, behavior: 'allow', input: ask.input }),
    ]);
    await session.stop();
  });

  it('updatedPermissions: a settings-file destination and a rule wider than proposed are refused; the proposed rule for this session is kept and audited', async () => {
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent', options: { cwd: rig.cwd } });
    const { ask, items } = await firstPrompt(session, echoTurn('toolu_rule', 'echo hi > rule.txt'));
    const suggestions = (ask.raw.permission_suggestions ?? []) as Record<string, unknown>[];
    const proposed = suggestions.find((s) => s.type === 'addRules' && s.behavior === 'allow');
    expect(proposed).toBeDefined();
    const allow = (updatedPermissions: unknown[]) =>
      session.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input, updatedPermissions });

    const toFile = await rejectionOf(allow([{ ...proposed, destination: 'userSettings' }]));
    expect(toFile.code).toBe('PERMISSION_DENIED');
    expect(toFile.message).toContain('only for this session');
    const wider = await rejectionOf(
      allow([{ type: 'addRules', rules: [{ toolName: 'Bash' }], behavior: 'allow', destination: 'session' }]),
    );
    expect(wider.code).toBe('PERMISSION_DENIED');
    expect(wider.message).toContain('the allow rule Bash is not one the engine proposed');
    const starred = await rejectionOf(
      allow([{ type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: '*' }], behavior: 'allow', destination: 'session' }]),
    );
    expect(starred.code).toBe('PERMISSION_DENIED');

    const kept = suggestions.map((s) => ({ ...s, destination: 'session' })); // the rule, and the session's own folder
    await allow(kept);
    await readTurn(session, () => undefined, items);
    expect(existsSync(join(rig.cwd, 'rule.txt'))).toBe(true);
    expect(rig.fake!.lastToolResults().find((r) => r.tool_use_id === 'toolu_rule')?.is_error).toBe(false);
    const settingsFiles = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith('settings')) : []);
    expect(settingsFiles(join(rig.home!, '.claude'))).toEqual([]);
    expect(settingsFiles(join(rig.cwd, '.claude'))).toEqual([]);
    const records = await decisions(session.id);
    expect(records.filter((r) => r.result === 'refused')).toHaveLength(3);
    expect(records.at(-1)).toMatchObject({ behavior: 'allow', updated_permissions: kept });
    await session.stop();
  });
});
