import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { answerQuestions, asPermissionRequest, askQuestions } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import type { FakeScenario } from './support/fake-anthropic.js';
import { startRig } from './support/engines.js';
import { codeOf, isCanUseTool, isReply, isResult, isWithdrawal, jsonAt, until } from './support/items.js';
import { toolResults } from './support/turns.js';
import { cleanupsOfTest, cleanupsPerTest } from './support/cleanups.js';
import { waitFor } from './support/wait.js';

const bashTurn = (command: string): FakeScenario => ({
  responses: [{ text: 'Running it.', tool_use: { name: 'Bash', input: { command, description: 'append a line' } } }, { text: 'Done.' }],
});

/** Per engine: how to make the model call Bash, and what the turn's text replies are. */
const SCRIPT = {
  claude: { bashPrompt: 'append a line', bash: bashTurn('echo hi >> made.txt'), askPrompt: 'ask me' },
  demo: { bashPrompt: 'create a file', bash: undefined, askPrompt: 'ask me a question' },
} as const;

// At once, five at a time: each test has its own rig, and the claude kind's time is mostly
// the CLI starting and the scripted model answering.
describe.concurrent.each(['claude', 'demo'] as const)('team sessions (%s engine)', (kind) => {
  it('two controllers and a viewer: the first answer wins, the other is withdrawn and refused, the tool runs once', async ({
    onTestFinished,
  }) => {
    const cleanups = cleanupsOfTest(onTestFinished);
    const rig = cleanups.own(await startRig(kind, SCRIPT[kind].bash));
    const [c1, c2, v] = [await rig.stack.client(), await rig.stack.client(), await rig.stack.client()];
    const s1 = await c1.createSession({ agent: 'test-agent' });
    const s2 = await c2.attach(s1.id);
    const sv = await v.attach(s1.id, { readOnly: true });
    expect(['owner', 'controller']).toContain(s2.role);
    expect(sv.role).toBe('viewer');
    const [i1, i2, iv] = [s1, s2, sv].map((s) => s[Symbol.asyncIterator]());
    const seen: SessionItem[][] = [[], [], []];

    await s1.sendUserMessage(SCRIPT[kind].bashPrompt);
    const prompts = await Promise.all([i1, i2, iv].map((it, n) => until(it, isCanUseTool, seen[n], 20_000, 'the permission prompt')));
    const ask = asPermissionRequest((prompts[0] as { message: Record<string, unknown> }).message)!;
    expect(prompts.map((p) => (p as { line: string }).line)).toEqual(Array(3).fill((prompts[0] as { line: string }).line));

    // The viewer may neither answer nor prompt.
    expect(await codeOf(sv.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }))).toBe('PERMISSION_DENIED');
    expect(await codeOf(sv.sendUserMessage('viewer prompt'))).toBe('PERMISSION_DENIED');

    await s1.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    expect(await codeOf(s2.answer(ask.requestId, { behavior: 'deny', message: 'too late' }))).toBe('FAILED_PRECONDITION');
    await until(i2, isWithdrawal(ask.requestId), seen[1], 10_000, 'the withdrawal');
    const results = await Promise.all([i1, i2, iv].map((it, n) => until(it, isResult, seen[n], 20_000, 'the result')));
    expect(results.every((r) => (r as { message: Record<string, unknown> }).message.is_error === false)).toBe(true);

    const engineMessages = seen[0]
      .filter((i) => i.kind === 'engine' && i.origin === 'engine')
      .map((i) => (i as { message: Record<string, unknown> }).message);
    expect(toolResults(engineMessages).filter((r) => !r.is_error)).toHaveLength(1);
    if (kind === 'claude') expect(readFileSync(join(rig.cwd, 'made.txt'), 'utf8')).toBe('hi\n');
    // Everyone saw the same stream: same seqs, same lines.
    const seqs = seen.map((list) => list.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq));
    expect(seqs[1].slice(-5)).toEqual(seqs[0].slice(-5));
    expect(seqs[2].slice(-5)).toEqual(seqs[0].slice(-5));
    const audit = await s1.audit();
    expect(audit.filter((e) => e.action === 'permission_decision')).toEqual([
      expect.objectContaining({ request_id: ask.requestId, behavior: 'allow' }),
    ]);
    expect(audit.filter((e) => e.action === 'prompt')).toHaveLength(1);
  });

  it('a late joiner sees every earlier turn, then the live one, with seqs increasing by one', async ({ onTestFinished }) => {
    const cleanups = cleanupsOfTest(onTestFinished);
    const rig = cleanups.own(await startRig(kind, { responses: [{ text: 'one' }, { text: 'two' }, { text: 'three' }, { text: 'four' }] }));
    const c1 = await rig.stack.client();
    const s1 = await c1.createSession({ agent: 'test-agent' });
    const i1 = s1[Symbol.asyncIterator]();
    for (const word of ['first', 'second', 'third']) {
      await s1.sendUserMessage(`say ${word}`);
      await until(i1, isResult);
    }
    const late = await (await rig.stack.client()).attach(s1.id);
    const il = late[Symbol.asyncIterator]();
    const got: SessionItem[] = [];
    await s1.sendUserMessage('say fourth');
    for (let n = 0; n < 4; n++) await until(il, isResult, got, 20_000, `result ${n + 1}`);
    const seqs = got.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);
    expect(seqs[0]).toBe(1);
    seqs.forEach((s, n) => expect(s).toBe(n + 1));
    const prompts = got.filter((i) => i.kind === 'event' && i.event.subtype === 'prompt');
    expect(prompts).toHaveLength(4);
  });

  it('a prompt raised with no controller attached is answered by one who attaches later', async ({ onTestFinished }) => {
    const cleanups = cleanupsOfTest(onTestFinished);
    const rig = cleanups.own(await startRig(kind, SCRIPT[kind].bash));
    const owner = await rig.stack.client();
    const s = await owner.createSession({ agent: 'test-agent' });
    await s.sendUserMessage(SCRIPT[kind].bashPrompt);
    await owner.detach(s);
    const watcher = await rig.stack.client();
    await waitFor(
      async () => (await watcher.listSessions()).find((x) => x.id === s.id)?.pending_prompts === 1,
      20_000,
      'the prompt to be raised',
    );
    const info = (await watcher.listSessions()).find((x) => x.id === s.id)!;
    expect(info.state).toBe('requires_action');
    expect(info.clients).toEqual([]);
    const later = await (await rig.stack.client()).attach(s.id);
    const it = later[Symbol.asyncIterator]();
    const prompt = (await until(it, isCanUseTool)) as { message: Record<string, unknown> };
    const ask = asPermissionRequest(prompt.message)!;
    await later.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    const result = (await until(it, isResult)) as { message: Record<string, unknown> };
    expect(result.message.is_error).toBe(false);
  });

  it('a prompt nobody answers is denied at expiry with a message the model reads', async ({ onTestFinished }) => {
    const cleanups = cleanupsOfTest(onTestFinished);
    const rig = cleanups.own(await startRig(kind, SCRIPT[kind].bash, { limits: { promptExpiryMs: 400 } }));
    const s = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const it = s[Symbol.asyncIterator]();
    const got: SessionItem[] = [];
    await s.sendUserMessage(SCRIPT[kind].bashPrompt);
    const prompt = (await until(it, isCanUseTool, got)) as { message: Record<string, unknown> };
    const requestId = asPermissionRequest(prompt.message)!.requestId;
    await until(it, isWithdrawal(requestId), got, 5_000, 'the expiry withdrawal');
    await until(it, isResult, got);
    const messages = got
      .filter((i) => i.kind === 'engine' && i.origin === 'engine')
      .map((i) => (i as { message: Record<string, unknown> }).message);
    const denied = toolResults(messages).find((r) => r.is_error);
    expect(denied?.content).toContain('expired');
    if (rig.fake) expect(rig.fake.lastToolResults().at(-1)?.content).toContain('expired');
    expect(await codeOf(s.answer(requestId, { behavior: 'allow', updatedInput: {} }))).toBe('FAILED_PRECONDITION');
  });

  it('two clients using the same request_id each get exactly their own response', async ({ onTestFinished }) => {
    const cleanups = cleanupsOfTest(onTestFinished);
    const rig = cleanups.own(await startRig(kind));
    const a = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const b = await (await rig.stack.client()).attach(a.id);
    const [ia, ib] = [a[Symbol.asyncIterator](), b[Symbol.asyncIterator]()];
    const [ga, gb]: SessionItem[][] = [[], []];
    await a.send({ type: 'control_request', request_id: 'same', request: { subtype: 'mcp_status' } });
    await b.send({ type: 'control_request', request_id: 'same', request: { subtype: 'get_binary_version' } });
    const ra = await until(ia, isReply, ga);
    const rb = await until(ib, isReply, gb);
    expect(jsonAt(ra.message, 'response', 'request_id')).toBe('same');
    expect(jsonAt(rb.message, 'response', 'request_id')).toBe('same');
    expect(jsonAt(ra.message, 'response', 'response')).toHaveProperty('mcpServers');
    expect(jsonAt(rb.message, 'response', 'response')).toHaveProperty('version');
    // Neither sees the other's reply, nor any engine control_response in the shared stream.
    await a.sendUserMessage('say something');
    await until(ia, isResult, ga);
    await until(ib, isResult, gb);
    expect(ga.filter((i) => i.kind === 'reply')).toHaveLength(1);
    expect(gb.filter((i) => i.kind === 'reply')).toHaveLength(1);
    expect([...ga, ...gb].some((i) => i.kind === 'engine' && i.message.type === 'control_response')).toBe(false);
  });

  it('AskUserQuestion: the chosen option reaches the model', async ({ onTestFinished }) => {
    const cleanups = cleanupsOfTest(onTestFinished);
    const question = {
      question: 'Which database should we use?',
      header: 'Database',
      options: [
        { label: 'Postgres', description: 'Relational' },
        { label: 'SQLite', description: 'Embedded' },
      ],
      multiSelect: false,
    };
    const rig = cleanups.own(
      await startRig(kind, {
        responses: [{ tool_use: { name: 'AskUserQuestion', input: { questions: [question] } } }, { text: 'Got it.' }],
      }),
    );
    const s = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const it = s[Symbol.asyncIterator]();
    const got: SessionItem[] = [];
    await s.sendUserMessage(SCRIPT[kind].askPrompt);
    const prompt = (await until(it, isCanUseTool, got)) as { message: Record<string, unknown> };
    const ask = asPermissionRequest(prompt.message)!;
    expect(ask.toolName).toBe('AskUserQuestion');
    expect(ask.requiresUserInteraction).toBe(true);
    const q = askQuestions(ask.input)[0];
    const choice = q.options[1].label;
    await s.answer(ask.requestId, answerQuestions(ask.input, { [q.question]: choice }) as never);
    const result = (await until(it, isResult, got)) as { message: Record<string, unknown> };
    expect(result.message.is_error).toBe(false);
    const messages = got.filter((i) => i.kind === 'engine').map((i) => (i as { message: Record<string, unknown> }).message);
    expect(toolResults(messages).some((r) => r.content.includes(choice))).toBe(true);
    if (rig.fake) expect(rig.fake.lastToolResults().at(-1)?.content).toContain('SQLite');
  });

  it('the owner hands control to a viewer and takes it back', async ({ onTestFinished }) => {
    const cleanups = cleanupsOfTest(onTestFinished);
    const rig = cleanups.own(await startRig(kind, { responses: [{ text: 'ok' }], fallback: { text: 'ok' } }));
    const owner = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const guest = await (await rig.stack.client()).attach(owner.id, { readOnly: true });
    expect(guest.role).toBe('viewer');
    expect(await codeOf(guest.sendUserMessage('hi'))).toBe('PERMISSION_DENIED');
    expect(await codeOf(guest.setRole(owner.clientId, 'viewer'))).toBe('PERMISSION_DENIED');
    await owner.setRole(guest.clientId, 'controller');
    const ig = guest[Symbol.asyncIterator]();
    await until(
      ig,
      (i) => i.kind === 'event' && i.event.subtype === 'presence' && i.event.action === 'role_changed' && i.event.role === 'controller',
    );
    expect(await guest.sendUserMessage('hi from the guest')).toBe('applied');
    await until(ig, isResult);
    await owner.setRole(guest.clientId, 'viewer');
    await until(
      ig,
      (i) => i.kind === 'event' && i.event.subtype === 'presence' && i.event.action === 'role_changed' && i.event.role === 'viewer',
    );
    expect(await codeOf(guest.sendUserMessage('again'))).toBe('PERMISSION_DENIED');
    const audit = await owner.audit();
    expect(audit.filter((e) => e.action === 'role_change').map((e) => e.role)).toEqual(['controller', 'viewer']);
  });
});

describe('team sessions: bad input changes nothing', () => {
  const cleanups = cleanupsPerTest();

  it('refuses malformed input lines with typed errors and the engine keeps running', async () => {
    const rig = cleanups.own(await startRig('demo'));
    const s = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    expect(await codeOf(s.send({ type: 'user' }))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(s.send({ type: 'user', message: { role: 'user' } }))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(s.send({ type: 'bogus' }))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(s.send({ type: 'control_request', request_id: 'x' }))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(s.send({ type: 'control_response', response: { subtype: 'success', request_id: 'never-raised' } }))).toBe(
      'NOT_FOUND',
    );
    expect(await codeOf(s.send({ type: 'control_cancel_request', request_id: 'not-mine' }))).toBe('NOT_FOUND');
    const it = s[Symbol.asyncIterator]();
    await s.sendUserMessage('still alive?');
    const r = (await until(it, isResult)) as { message: Record<string, unknown> };
    expect(r.message.is_error).toBe(false);
    expect(await s.send({ type: 'keep_alive' })).toBe('applied');
    // Same input id twice: applied once.
    expect(await s.send({ type: 'keep_alive' }, 'dup-1')).toBe('applied');
    expect(await s.send({ type: 'keep_alive' }, 'dup-1')).toBe('duplicate');
  });
});
