import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { query, type Options, type SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import { runPipe } from '../client/pipe-mode.js';
import { withRemoteEngine } from '../client/remote-spawn.js';
import type { RemoteSession } from '../client/remote-session.js';
import { describeEvent } from '../client/terminal-render.js';
import type { TetherEvent } from '../core/protocol/events.js';
import { Transcript } from '../client/web/src/transcript.js';
import { TetherError } from '../core/errors.js';
import { Policy } from '../core/policy/policy.js';
import type { AuditRecord } from '../core/protocol/audit.js';
import { MemoryAuditLog, type AuditEntry } from '../gateway/audit/audit-log.js';
import { FilePolicy, StaticPolicy, type PolicyProvider } from '../gateway/policy/policy-source.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import type { FakeScenario } from './support/fake-anthropic.js';
import { withTimeout } from './support/stack.js';
import { readTurn, type TurnLog } from './support/turns.js';
import { rejectionOf } from './support/items.js';

/**
 * The central policy with the real Claude Code CLI and the scripted model: the agent's
 * PreToolUse hook, answered at the gateway, holds whatever the client asks for.
 */

const rmTurn = (file: string): FakeScenario => ({
  responses: [
    { text: 'Removing it.', tool_use: { id: 'toolu_rm', name: 'Bash', input: { command: `rm -rf ${file}`, description: 'remove' } } },
    { text: 'Done.' },
  ],
});

let rig: EngineRig | undefined;
const temps: TempDir[] = [];
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
  for (const t of temps.splice(0)) t.cleanup();
});

async function start(
  policy: PolicyProvider,
  scenario: FakeScenario,
  audit = new MemoryAuditLog(),
): Promise<{ rig: EngineRig; audit: MemoryAuditLog }> {
  // Root may launch bypassPermissions only with IS_SANDBOX=1 (docs/engine-protocol.md 1.1).
  rig = await startRig(
    'claude',
    scenario,
    { audit, policy, agentOptions: { engineFlags: { allowBypassPermissions: true } } },
    { IS_SANDBOX: '1' },
  );
  return { rig, audit };
}

function policyOf(file: unknown): StaticPolicy {
  return new StaticPolicy(Policy.compile(file));
}

function policyRecords(audit: MemoryAuditLog): Promise<AuditRecord[]> {
  return audit.read({ action: 'policy_decision' }).then((r) => r.entries);
}

function events(turn: TurnLog, subtype: string): Record<string, unknown>[] {
  return turn.items.flatMap((i) => (i.kind === 'event' && i.event.subtype === subtype ? [i.event as Record<string, unknown>] : []));
}

describe('central policy with the real CLI', () => {
  it.each(['default', 'acceptEdits', 'bypassPermissions'] as const)(
    'deny Bash(rm *) stops rm -rf in %s mode: the file survives, the model sees the rule, the audit says the policy decided',
    async (mode) => {
      const { rig: r, audit } = await start(policyOf({ permissions: { deny: ['Bash(rm *)'] } }), rmTurn('keep.txt'));
      writeFileSync(join(r.cwd, 'keep.txt'), 'precious');
      const client = await r.stack.client();
      const session = await client.createSession({ agent: 'test-agent', options: { permission_mode: mode } });
      await session.sendUserMessage('clean up');
      const turn = await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
      expect(turn.prompts).toEqual([]); // denied before any prompt, whatever the mode
      expect(existsSync(join(r.cwd, 'keep.txt'))).toBe(true);
      const seen = r.fake!.lastToolResults().find((t) => t.tool_use_id === 'toolu_rm');
      expect(seen?.is_error).toBe(true);
      expect(seen?.content).toContain('Bash(rm *)');
      expect(events(turn, 'policy_decision')).toEqual([
        expect.objectContaining({ tool: 'Bash', decision: 'deny', rule: 'Bash(rm *)', tool_use_id: 'toolu_rm' }),
      ]);
      const records = await policyRecords(audit);
      expect(records).toEqual([
        expect.objectContaining({
          session_id: session.id,
          principal: 'tether:policy',
          tool: 'Bash',
          decision: 'deny',
          rule: 'Bash(rm *)',
          permission_mode: mode,
          input: expect.objectContaining({ command: 'rm -rf keep.txt' }),
        }),
      ]);
    },
  );

  it('an allow rule lets a call run without the prompt the engine would raise; the rule is shown and audited', async () => {
    const scenario: FakeScenario = {
      responses: [
        { text: 'Writing.', tool_use: { id: 'toolu_echo', name: 'Bash', input: { command: 'echo hi > made.txt', description: 'write' } } },
        { text: 'Done.' },
      ],
    };
    const { rig: r, audit } = await start(policyOf({ permissions: { deny: ['Bash(rm *)'], allow: ['Bash(echo *)'] } }), scenario);
    const client = await r.stack.client();
    const session = await client.createSession({ agent: 'test-agent' });
    await session.sendUserMessage('make a file');
    const turn = await readTurn(session, () => ({ behavior: 'deny', message: 'no' }));
    expect(turn.prompts).toEqual([]); // Bash prompts in default mode; the allow rule answered instead
    expect(existsSync(join(r.cwd, 'made.txt'))).toBe(true);
    expect(events(turn, 'policy_decision')).toEqual([expect.objectContaining({ decision: 'allow', rule: 'Bash(echo *)' })]);
    expect(await policyRecords(audit)).toEqual([
      expect.objectContaining({ principal: 'tether:policy', decision: 'allow', rule: 'Bash(echo *)' }),
    ]);
  });

  it('a decision that cannot be audited is a deny, even for a call no rule covers in bypassPermissions', async () => {
    class FailingPolicyAudit extends MemoryAuditLog {
      override record(entry: AuditEntry): void {
        if (entry.action === 'policy_decision')
          throw new TetherError('FAILED_PRECONDITION', 'the audit trail cannot be written (ENOSPC); the action was not applied');
        super.record(entry);
      }
    }
    const scenario: FakeScenario = {
      responses: [
        { text: 'Writing.', tool_use: { id: 'toolu_echo', name: 'Bash', input: { command: 'echo hi > made.txt', description: 'write' } } },
        { text: 'Done.' },
      ],
    };
    const { rig: r } = await start(policyOf({}), scenario, new FailingPolicyAudit());
    const client = await r.stack.client();
    const session = await client.createSession({ agent: 'test-agent', options: { permission_mode: 'bypassPermissions' } });
    await session.sendUserMessage('make a file');
    const turn = await readTurn(session, () => undefined);
    expect(existsSync(join(r.cwd, 'made.txt'))).toBe(false);
    expect(r.fake!.lastToolResults().find((t) => t.tool_use_id === 'toolu_echo')).toMatchObject({
      is_error: true,
      content: expect.stringContaining('audit trail cannot be written'),
    });
    expect(events(turn, 'policy_decision')).toEqual([]);
  });

  it.each(['default', 'bypassPermissions'] as const)(
    'an ask rule turns an auto-approved Read into a prompt for controllers in %s mode; the person who answered is audited',
    async (mode) => {
      const scenario: FakeScenario = {
        responses: [{ text: 'Reading.', tool_use: { id: 'toolu_read', name: 'Read', input: { file_path: '' } } }, { text: 'Read it.' }],
      };
      const { rig: r, audit } = await start(policyOf({ permissions: { ask: ['Read(/notes/**)'] } }), scenario);
      mkdirSync(join(r.cwd, 'notes'));
      writeFileSync(join(r.cwd, 'notes', 'a.txt'), 'hello');
      r.fake!.setScenario({
        responses: [
          { text: 'Reading.', tool_use: { id: 'toolu_read', name: 'Read', input: { file_path: join(r.cwd, 'notes', 'a.txt') } } },
          { text: 'Read it.' },
        ],
      });
      const client = await r.stack.client();
      const session = await client.createSession({ agent: 'test-agent', options: { permission_mode: mode } });
      await session.sendUserMessage('read my notes');
      const turn = await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
      expect(turn.prompts.map((p) => p.toolName)).toEqual(['Read']); // Read never prompts on its own
      expect(r.fake!.lastToolResults().find((t) => t.tool_use_id === 'toolu_read')?.content).toContain('hello');
      expect(events(turn, 'policy_decision')).toEqual([
        expect.objectContaining({ tool: 'Read', decision: 'ask', rule: 'Read(/notes/**)' }),
      ]);
      expect(await policyRecords(audit)).toEqual([
        expect.objectContaining({ principal: 'tether:policy', decision: 'ask', rule: 'Read(/notes/**)' }),
      ]);
      const people = (await audit.read({ action: 'permission_decision' })).entries;
      expect(people).toEqual([
        expect.objectContaining({
          principal: 'test-user',
          behavior: 'allow',
          client_id: expect.any(String),
          tool: 'Read',
          tool_use_id: 'toolu_read',
          input: { file_path: join(r.cwd, 'notes', 'a.txt') },
        }),
      ]);
    },
  );

  it('a client below the ceiling cannot raise the mode to bypassPermissions, at create or later; the refusal names the rule', async () => {
    const { rig: r, audit } = await start(policyOf({ maxPermissionMode: { '*': 'acceptEdits', admin: 'bypassPermissions' } }), {
      responses: [],
    });
    const controller = await r.stack.client({ sub: 'carol', scopes: ['create', 'control'] });
    const refused = await rejectionOf(controller.createSession({ agent: 'test-agent', options: { permission_mode: 'bypassPermissions' } }));
    expect(refused.code).toBe('PERMISSION_DENIED');
    expect(refused.message).toContain('maxPermissionMode.* = acceptEdits');
    const viaArgs = await rejectionOf(
      controller.createSession({ agent: 'test-agent', options: { extra_args: ['--dangerously-skip-permissions'] } }),
    );
    expect(viaArgs.code).toBe('PERMISSION_DENIED');
    const session = await controller.createSession({ agent: 'test-agent' });
    expect(await session.request('set_permission_mode', { mode: 'acceptEdits' })).toMatchObject({
      response: { subtype: 'success', response: { mode: 'acceptEdits' } },
    });
    const later = await rejectionOf(session.request('set_permission_mode', { mode: 'bypassPermissions' }));
    expect(later.code).toBe('PERMISSION_DENIED');
    expect(later.message).toContain('maxPermissionMode.* = acceptEdits');
    const viewer = await r.stack.client({ sub: 'vera', scopes: ['view'] });
    const attached = await viewer.attach(session.id);
    expect((await rejectionOf(attached.request('set_permission_mode', { mode: 'bypassPermissions' }))).code).toBe('PERMISSION_DENIED');
    const controls = (await audit.read({ action: 'control' })).entries.filter((c) => c.result === 'refused');
    expect(controls).toEqual([
      expect.objectContaining({
        principal: 'carol',
        subtype: 'set_permission_mode',
        mode: 'bypassPermissions',
        decided_by: 'tether:policy',
        reason: expect.stringContaining('maxPermissionMode.* = acceptEdits'),
      }),
    ]);
    const creates = (await audit.read({ action: 'create' })).entries;
    expect(creates.filter((c) => c.result === 'refused')).toEqual([
      expect.objectContaining({ principal: 'carol', decided_by: 'tether:policy', reason: expect.stringContaining('maxPermissionMode') }),
      expect.objectContaining({ principal: 'carol', decided_by: 'tether:policy' }),
    ]);
  });

  it('a session cannot start outside the working-folder roots', async () => {
    const root = makeTempDir('tether-root-');
    temps.push(root);
    const { rig: r, audit } = await start(policyOf({ workingFolders: { 'test-agent': [root.path] } }), { responses: [] });
    const client = await r.stack.client();
    const outside = await rejectionOf(client.createSession({ agent: 'test-agent', options: { cwd: r.cwd } }));
    expect(outside.code).toBe('PERMISSION_DENIED');
    expect(outside.message).toContain(`workingFolders.test-agent = ${root.path}`);
    const climbing = await rejectionOf(client.createSession({ agent: 'test-agent', options: { cwd: `${root.path}/../` } }));
    expect(climbing.code).toBe('PERMISSION_DENIED');
    // A symlink inside the root that leads out passes the gateway's check of the path as
    // written; the agent, given the policy's folders, follows it on its machine and refuses.
    symlinkSync(r.cwd, join(root.path, 'escape'));
    const viaLink = await rejectionOf(client.createSession({ agent: 'test-agent', options: { cwd: join(root.path, 'escape') } }));
    expect(viaLink.code).toBe('PERMISSION_DENIED');
    expect(viaLink.message).toContain(`(policy rule: workingFolders.test-agent = ${root.path})`);
    const inside = await client.createSession({ agent: 'test-agent', options: { cwd: root.path } });
    expect(inside.id).toBeTruthy();
    expect((await audit.read({ action: 'create' })).entries.filter((c) => c.result === 'refused')).toHaveLength(2);
  });

  it("a frontend's own PreToolUse hook still fires beside the policy's, and its initialize cannot remove ours", async () => {
    const { rig: r, audit } = await start(policyOf({ permissions: { deny: ['Bash(rm *)'] } }), rmTurn('keep.txt'));
    writeFileSync(join(r.cwd, 'keep.txt'), 'precious');
    const client = await r.stack.client();
    // As the SDK drop-in opens a session: the client's own initialize is the engine's first,
    // with its own hook only. Ours is merged in.
    const session = await client.createSession({
      agent: 'test-agent',
      options: { permission_mode: 'acceptEdits', client_initialize: true },
    });
    const init = await session.request('initialize', { hooks: { PreToolUse: [{ hookCallbackIds: ['frontend_hook'] }] } });
    expect(init).toMatchObject({ response: { subtype: 'success', response: { hooks_applied: true, hook_on_failure_supported: true } } });
    await session.sendUserMessage('clean up');
    const seenByFrontend: string[] = [];
    const turn = await readTurnAnsweringHooks(session, seenByFrontend);
    expect(seenByFrontend).toEqual(['Bash']);
    expect(existsSync(join(r.cwd, 'keep.txt'))).toBe(true);
    expect(events(turn, 'policy_decision')).toEqual([expect.objectContaining({ decision: 'deny', rule: 'Bash(rm *)' })]);
    expect(await policyRecords(audit)).toEqual([expect.objectContaining({ principal: 'tether:policy', decision: 'deny' })]);
    // An initialize that clears every hook still leaves ours in place.
    await session.request('initialize', { hooks: {} });
    r.fake!.setScenario(rmTurn('keep.txt'));
    await session.sendUserMessage('again');
    await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
    expect(existsSync(join(r.cwd, 'keep.txt'))).toBe(true);
    expect(await policyRecords(audit)).toHaveLength(2);
  });

  it('the real SDK through the drop-in: its own PreToolUse hook fires, and the policy still denies', async () => {
    const { rig: r, audit } = await start(policyOf({ permissions: { deny: ['Bash(rm *)'] } }), rmTurn('keep.txt'));
    writeFileSync(join(r.cwd, 'keep.txt'), 'precious');
    const seen: string[] = [];
    const sdkHook = async (input: { tool_name?: string }) => (seen.push(input.tool_name ?? '?'), {});
    const own: Options = { permissionMode: 'acceptEdits', hooks: { PreToolUse: [{ hooks: [sdkHook as never] }] } };
    const options = withRemoteEngine(own, { gateway: r.stack.url, token: r.stack.token, agent: 'test-agent', cwd: r.cwd });
    const messages: SDKMessage[] = [];
    const drive = async () => {
      for await (const m of query({ prompt: 'clean up', options })) messages.push(m);
    };
    await withTimeout(drive(), 30_000, 'the SDK query');
    expect(seen).toEqual(['Bash']);
    expect(existsSync(join(r.cwd, 'keep.txt'))).toBe(true);
    const results = messages.flatMap((m) => (m.type === 'user' && Array.isArray(m.message.content) ? m.message.content : [])) as {
      type: string;
      is_error?: boolean;
      content?: unknown;
    }[];
    expect(results.find((b) => b.type === 'tool_result')).toMatchObject({ is_error: true, content: expect.stringContaining('Bash(rm *)') });
    expect(await policyRecords(audit)).toEqual([
      expect.objectContaining({ principal: 'tether:policy', decision: 'deny', rule: 'Bash(rm *)' }),
    ]);
  });

  it('a reload takes effect for the next tool call; a broken file is refused with its path, rule and why, and the old policy stays', async () => {
    const dir = makeTempDir('tether-policy-');
    temps.push(dir);
    const file = join(dir.path, 'policy.yaml');
    writeFileSync(file, 'permissions:\n  deny: []\n');
    const policy = new FilePolicy(file).watch();
    try {
      const { rig: r, audit } = await start(policy, rmTurn('a.txt'));
      for (const f of ['a.txt', 'b.txt', 'c.txt']) writeFileSync(join(r.cwd, f), f);
      const client = await r.stack.client();
      const session = await client.createSession({ agent: 'test-agent' });
      await session.sendUserMessage('remove a');
      const first = await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
      expect(first.prompts.map((p) => p.toolName)).toEqual(['Bash']); // no rule: the engine asks people
      expect(existsSync(join(r.cwd, 'a.txt'))).toBe(false);

      await reloadTo(policy, () => writeFileSync(file, 'permissions:\n  deny: ["Bash(rm *)"]\n'));
      r.fake!.setScenario(rmTurn('b.txt'));
      await session.sendUserMessage('remove b');
      const second = await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
      expect(second.prompts).toEqual([]);
      expect(existsSync(join(r.cwd, 'b.txt'))).toBe(true);

      const refused = await reloadTo(policy, () => writeFileSync(file, 'permissions:\n  deny: ["Bash(rm *)", "Frobnicate(x)"]\n'));
      expect(refused?.message).toContain(file);
      expect(refused?.message).toContain('permissions.deny[1] "Frobnicate(x)"');
      r.fake!.setScenario(rmTurn('c.txt'));
      await session.sendUserMessage('remove c');
      const third = await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
      expect(third.prompts).toEqual([]);
      expect(existsSync(join(r.cwd, 'c.txt'))).toBe(true);

      const decisions = (await policyRecords(audit)).map((e) => [e.decision, e.rule]);
      expect(decisions).toEqual([
        ['none', null],
        ['deny', 'Bash(rm *)'],
        ['deny', 'Bash(rm *)'],
      ]);
      expect((await audit.read({ decision: 'allow' })).entries).toEqual([
        expect.objectContaining({ action: 'permission_decision', principal: 'test-user' }),
      ]);
    } finally {
      policy.close();
    }
  });
});

describe('every client shows why', () => {
  it('pipe mode prints the policy_decision line; the library has it as an item; the terminal and the web page say the rule', async () => {
    const { rig: r, audit } = await start(policyOf({ permissions: { deny: ['Bash(rm *)'] } }), rmTurn('keep.txt'));
    writeFileSync(join(r.cwd, 'keep.txt'), 'precious');
    const client = await r.stack.client();
    const session = await client.createSession({ agent: 'test-agent' });
    const input = new PassThrough();
    const out: string[] = [];
    // Input stays open until the turn's result: the policy answers the engine on its stdin.
    const output = new Writable({
      write: (chunk, _enc, done) => {
        const lines = String(chunk).split('\n').filter(Boolean);
        out.push(...lines);
        if (lines.some((l) => l.startsWith('{"type":"result"') || JSON.parse(l).type === 'result')) void session.stop();
        done();
      },
    });
    input.write(JSON.stringify({ type: 'user', message: { role: 'user', content: 'clean up' } }) + '\n');
    expect(await withTimeout(runPipe(session, input, output, { stopOnEof: false }), 30_000, 'pipe mode to finish')).toBe(0);
    const lines = out.map((l) => JSON.parse(l) as Record<string, unknown>);
    const decision = lines.find((l) => l.type === 'tether' && l.subtype === 'policy_decision') as TetherEvent | undefined;
    expect(decision).toMatchObject({ tool: 'Bash', decision: 'deny', rule: 'Bash(rm *)', tool_use_id: 'toolu_rm' });
    expect(lines.some((l) => l.type === 'control_request')).toBe(false); // neither our hook callback nor a prompt reached the client
    expect(describeEvent(decision!)).toBe('* policy denied Bash (rule Bash(rm *))');
    const page = new Transcript();
    page.apply({ kind: 'event', seq: 1, event: decision! });
    expect(page.entries).toMatchObject([{ kind: 'note', text: 'policy denied Bash (rule Bash(rm *))' }]);
    expect(existsSync(join(r.cwd, 'keep.txt'))).toBe(true);
    expect(await policyRecords(audit)).toEqual([
      expect.objectContaining({ principal: 'tether:policy', decision: 'deny', rule: 'Bash(rm *)', tool_use_id: 'toolu_rm' }),
    ]);
  });
});

/** Changes the file and waits (bounded) for the reload it causes; returns the refusal, if any. */
async function reloadTo(policy: FilePolicy, change: () => void): Promise<TetherError | undefined> {
  const done = new Promise<TetherError | undefined>((resolve) => (policy.onReload = resolve));
  change();
  return withTimeout(done, 10_000, 'the policy reload');
}

/** Reads a turn, answering the frontend's own hook callbacks with no opinion and noting each tool. */
async function readTurnAnsweringHooks(session: RemoteSession, seen: string[]): Promise<TurnLog> {
  const it = session[Symbol.asyncIterator]();
  const items: TurnLog['items'] = [];
  const run = async (): Promise<TurnLog> => {
    for (;;) {
      const next = await it.next();
      if (next.done) throw new Error('session ended before a result');
      items.push(next.value);
      if (next.value.kind !== 'engine') continue;
      const m = next.value.message as {
        type?: string;
        request_id?: string;
        request?: { subtype?: string; callback_id?: string; input?: { tool_name?: string } };
      };
      if (m.type === 'control_request' && m.request?.subtype === 'hook_callback') {
        expect(m.request.callback_id).toBe('frontend_hook'); // the policy's own callbacks never reach clients
        seen.push(m.request.input?.tool_name ?? '?');
        await session.send({ type: 'control_response', response: { subtype: 'success', request_id: m.request_id, response: {} } });
      }
      if (m.type === 'result') return { items, messages: [], prompts: [], result: next.value.message };
    }
  };
  return withTimeout(run(), 30_000, 'the turn');
}
