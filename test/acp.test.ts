import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as acp from '@agentclientprotocol/sdk';
import { createWebSocketStream, type WebSocketConstructor } from '@agentclientprotocol/sdk/experimental/ws-client';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { agentText, connectEditor, select, spawnAcp, type Editor } from './support/acp-editor.js';
import { startRig, type EngineRig } from './support/engines.js';
import { runTether } from './support/cli.js';
import { withTimeout } from './support/stack.js';
import { waitFor } from './support/wait.js';
import { isResult, until } from './support/items.js';

const bash = (id: string, file: string) => ({
  text: `Running ${id}.`,
  tool_use: { id, name: 'Bash', input: { command: `echo hi > ${file}`, description: `write ${file}` } },
});

/** What one update stands for, compactly, for order checks. */
const kindOf = (n: acp.SessionNotification) => {
  const u = n.update;
  return u.sessionUpdate === 'tool_call' || u.sessionUpdate === 'tool_call_update'
    ? `${u.sessionUpdate}:${u.status ?? ''}`
    : u.sessionUpdate;
};

/** Collapses runs of the same kind, so streamed chunks read as one step. */
const steps = (updates: acp.SessionNotification[]) => updates.map(kindOf).filter((k, i, a) => i === 0 || a[i - 1] !== k);

/** Each test's rig and editor, stopped after it. */
let rig: EngineRig | undefined;
let editor: Editor | undefined;
afterEach(async () => {
  await editor?.close();
  await rig?.stop();
  rig = editor = undefined;
});

/** Resolves once `cond` holds (polled, bounded). */

/** A rig, `tether acp` on it, initialized with `clientCapabilities`, and one new session. */
const openSession = async (clientCapabilities: acp.ClientCapabilities = {}) => {
  const r = (rig = await startRig('claude'));
  const ed = (editor = spawnAcp(['--agent', 'test-agent', '--gateway', r.stack.url], { TETHER_TOKEN: r.stack.token }));
  await ed.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities });
  const { sessionId } = await ed.agent.request(acp.methods.agent.session.new, { cwd: '/editor/project', mcpServers: [] });
  return { rig: r, editor: ed, sessionId };
};

/** An editor that never answers a permission request by itself: only its withdrawal ends it (as cancelled). */
const answersOnlyWhenWithdrawn = (_req: unknown, signal: AbortSignal) =>
  new Promise<{ outcome: { outcome: 'cancelled' } }>((resolve) => {
    const cancelled = () => resolve({ outcome: { outcome: 'cancelled' } });
    if (signal.aborted) cancelled();
    else signal.addEventListener('abort', cancelled);
  });

describe('tether acp: the ACP SDK client drives the real CLI through gateway and agent', () => {
  const start = async () => {
    rig = await startRig('claude');
    editor = spawnAcp(['--agent', 'test-agent', '--gateway', rig.stack.url], { TETHER_TOKEN: rig.stack.token });
    return { rig, editor };
  };

  it('initialize, session/new, a streamed prompt, Bash allowed then rejected, and a teammate sees the turn', async () => {
    const { rig, editor } = await start();
    const init = await editor.agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    expect(init.protocolVersion).toBe(acp.PROTOCOL_VERSION);
    expect(init.agentCapabilities?.loadSession).toBe(true);
    expect(init.agentCapabilities?.promptCapabilities?.image).toBe(false);

    const created = await editor.agent.request(acp.methods.agent.session.new, { cwd: '/editor/project', mcpServers: [] });
    const sessionId = created.sessionId;
    expect(created.modes?.currentModeId).toBe('default');
    // The ACP session is an ordinary Tether session: a teammate attaches by the same id.
    const teammate = await (await rig.stack.client()).attach(sessionId);
    const seen: SessionItem[] = [];
    void (async () => {
      for await (const item of teammate) seen.push(item);
    })().catch(() => {});

    // 1. A plain prompt: text streamed as agent_message_chunk, then the answer.
    rig.fake!.setScenario({ responses: [{ thinking: 'The user says hi.', text: 'Hello from the remote model.' }] });
    const r1 = await withTimeout(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'hi' }] }),
      60_000,
      'first prompt',
    );
    expect(r1.stopReason).toBe('end_turn');
    expect(agentText(editor.updates)).toBe('Hello from the remote model.');
    expect(steps(editor.updates)).toEqual(['agent_thought_chunk', 'agent_message_chunk']);
    expect(
      editor.updates
        .map((n) => (n.update.sessionUpdate === 'agent_thought_chunk' && n.update.content.type === 'text' ? n.update.content.text : ''))
        .join(''),
    ).toBe('The user says hi.');
    expect(editor.updates.every((u) => u.sessionId === sessionId)).toBe(true);

    // 2. Bash: the editor is asked and allows; the file appears in the agent's cwd.
    editor.updates.length = 0;
    rig.fake!.setScenario({ responses: [bash('toolu_a', 'allowed.txt'), { text: 'Done.' }] });
    editor.onPermission = async (req) => {
      expect(req.options.map((o) => o.kind)).toEqual(['allow_once', 'allow_always', 'reject_once']);
      expect(req.toolCall.toolCallId).toBe('toolu_a');
      expect(req.toolCall.title).toContain('echo hi > allowed.txt');
      return select('allow');
    };
    const r2 = await withTimeout(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'write it' }] }),
      60_000,
      'allowed prompt',
    );
    expect(r2.stopReason).toBe('end_turn');
    expect(existsSync(join(rig.cwd, 'allowed.txt'))).toBe(true);
    expect(steps(editor.updates)).toEqual([
      'agent_message_chunk',
      'tool_call:pending',
      'tool_call_update:pending',
      'tool_call_update:in_progress',
      'tool_call_update:completed',
      'agent_message_chunk',
    ]);
    expect(agentText(editor.updates)).toBe('Running toolu_a.Done.');
    const call = editor.updates.find((u) => u.update.sessionUpdate === 'tool_call')!.update as acp.ToolCall;
    expect(call).toMatchObject({ toolCallId: 'toolu_a', kind: 'execute' });

    // 3. A second Bash, rejected: no file, the tool call fails, the model is told.
    editor.updates.length = 0;
    rig.fake!.setScenario({ responses: [bash('toolu_b', 'rejected.txt'), { text: 'Understood.' }] });
    editor.onPermission = async () => select('reject');
    const r3 = await withTimeout(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'write another' }] }),
      60_000,
      'rejected prompt',
    );
    expect(r3.stopReason).toBe('end_turn');
    expect(existsSync(join(rig.cwd, 'rejected.txt'))).toBe(false);
    expect(steps(editor.updates)).toContain('tool_call_update:failed');
    expect(rig.fake!.lastToolResults().at(-1)).toMatchObject({ is_error: true });
    expect(rig.fake!.lastToolResults().at(-1)?.content).toContain('Rejected in the editor');
    expect(editor.permissionRequests).toHaveLength(2);

    // The teammate saw the same turns: the prompts and the assistant's words.
    const lines = () =>
      seen
        .filter((i) => i.kind === 'engine')
        .map((i) => (i as { line: string }).line)
        .join('\n');
    await waitFor(() => lines().includes('Understood.'), 10_000, 'the teammate to see the last turn');
    expect(lines()).toContain('Hello from the remote model.');
    expect(lines()).toContain('"can_use_tool"');
    expect(lines()).toContain('allowed.txt');
  }, 180_000);

  it('session/cancel mid-turn interrupts the engine and the prompt stops as cancelled', async () => {
    const { rig, editor } = await start();
    await editor.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: '/editor/project', mcpServers: [] });
    rig.fake!.setScenario({
      responses: [{ text: Array.from({ length: 200 }, (_, i) => `word${i}`).join(' '), chunk_delay_ms: 50 }],
      fallback: { text: 'after' },
    });
    const prompt = editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'talk a lot' }] });
    await editor.waitFor((u) => agentText(u).includes('word2'), 'the first streamed words');
    await editor.agent.notify(acp.methods.agent.session.cancel, { sessionId });
    const r = await withTimeout(prompt, 30_000, 'the cancelled prompt');
    expect(r.stopReason).toBe('cancelled');
    expect(agentText(editor.updates)).not.toContain('word199');
  }, 120_000);

  it("the editor's prompt while a teammate's turn runs is queued and answered by its own turn; session/cancel while it waits withdraws it and leaves the teammate's turn running", async () => {
    const { rig, editor } = await start();
    await editor.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: '/editor/project', mcpServers: [] });
    const slow = { text: 'one two three four five six seven eight nine ten', chunk_delay_ms: 200 };
    rig.fake!.setScenario({ responses: [slow, { text: 'EDITOR_ANSWER' }, slow], fallback: { text: 'OK.' } });
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(sessionId);
    const bobItems = bob[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    const bobResult = () => until(bobItems, isResult, seen, 30_000, 'a turn to end');
    await bob.send('teammate prompt');
    await waitFor(() => rig.fake!.textDeltasSent() > 0, 30_000, "bob's turn to stream");

    const r1 = await withTimeout(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'editor prompt' }] }),
      60_000,
      'the queued prompt',
    );
    expect(r1.stopReason).toBe('end_turn');
    expect(agentText(editor.updates)).toContain('EDITOR_ANSWER'); // its own answer, not bob's turn's end
    expect(rig.fake!.modelRequests()[1].raw).toContain('editor prompt');

    const deltas = rig.fake!.textDeltasSent();
    await bob.send('another teammate prompt');
    await waitFor(() => rig.fake!.textDeltasSent() > deltas, 30_000, "bob's second turn to stream");
    const waiting = editor.agent.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: 'text', text: 'WITHDRAWN_EDITOR' }],
    });
    await until(
      bobItems,
      (i) => i.kind === 'event' && i.event.subtype === 'queued' && i.event.change.action === 'queued',
      seen,
      20_000,
      "the editor's prompt queued",
    );
    await editor.agent.notify(acp.methods.agent.session.cancel, { sessionId });
    expect((await withTimeout(waiting, 30_000, 'the withdrawn prompt')).stopReason).toBe('cancelled');
    // Bob's turn was not interrupted: it ends as it would have, and the withdrawn prompt never reached the model.
    const results = () => seen.filter(isResult) as { message: Record<string, unknown> }[];
    while (results().length < 3) await bobResult(); // bob's, the editor's, bob's second
    expect(results()[2].message).toMatchObject({ subtype: 'success', is_error: false });
    expect(seen.some((i) => i.kind === 'event' && i.event.subtype === 'interrupt')).toBe(false);
    expect(rig.fake!.requests.some((r) => r.raw.includes('WITHDRAWN_EDITOR'))).toBe(false);
  }, 120_000);

  it('a permission prompt answered by a teammate is withdrawn in the editor', async () => {
    const { rig, editor } = await start();
    await editor.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: '/editor/project', mcpServers: [] });
    const teammate = await (await rig.stack.client()).attach(sessionId);
    rig.fake!.setScenario({ responses: [bash('toolu_w', 'teammate.txt'), { text: 'Done.' }] });
    // The editor never answers by itself: only the withdrawal ends its request.
    editor.onPermission = answersOnlyWhenWithdrawn;
    const prompt = editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'write it' }] });
    for await (const item of teammate) {
      if (item.kind !== 'engine') continue;
      const m = item.message as { type?: string; request_id?: string; request?: { subtype?: string; input?: Record<string, unknown> } };
      if (m.type === 'control_request' && m.request?.subtype === 'can_use_tool') {
        await teammate.answer(m.request_id!, { behavior: 'allow', updatedInput: m.request.input ?? {} });
        break;
      }
    }
    const r = await withTimeout(prompt, 60_000, 'the prompt after the teammate allowed');
    expect(r.stopReason).toBe('end_turn');
    expect(existsSync(join(rig.cwd, 'teammate.txt'))).toBe(true);
    expect(editor.permissionRequests).toHaveLength(1);
    await waitFor(() => editor!.withdrawn.length > 0, 10_000, 'the withdrawal to reach the editor');
    expect(editor.withdrawn).toEqual(['toolu_w']);
  }, 120_000);
});

const QUESTION = {
  question: 'Which database?',
  header: 'Database',
  multiSelect: false,
  options: [
    { label: 'Postgres', description: 'the big one' },
    { label: 'SQLite', description: 'a file' },
  ],
};
const ASK_SCENARIO = {
  responses: [
    {
      text: 'Planning.',
      tool_use: {
        id: 'toolu_todo',
        name: 'TodoWrite',
        input: {
          todos: [
            { content: 'Pick a database', status: 'in_progress', activeForm: 'Picking' },
            { content: 'Migrate', status: 'pending', activeForm: 'Migrating' },
          ],
        },
      },
    },
    { text: 'One question.', tool_use: { id: 'toolu_ask', name: 'AskUserQuestion', input: { questions: [QUESTION] } } },
    { text: 'SQLite it is.' },
  ],
};

describe('tether acp: modes, plans and AskUserQuestion', () => {
  it('set_mode reaches the engine; TodoWrite is a plan; AskUserQuestion goes through elicitation when the editor has it', async () => {
    const { rig, editor, sessionId } = await openSession({ elicitation: { form: {} } });
    await editor.agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: 'acceptEdits' });
    expect(editor.updates.at(-1)?.update).toEqual({ sessionUpdate: 'current_mode_update', currentModeId: 'acceptEdits' });
    await expect(editor.agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: 'no-such-mode' })).rejects.toMatchObject({
      code: -32602,
    });

    rig.fake!.setScenario(ASK_SCENARIO);
    editor.onElicit = async (req) => {
      const props = (req as { requestedSchema: acp.ElicitationSchema }).requestedSchema.properties!;
      expect(props.q0).toMatchObject({ type: 'string', enum: ['Postgres', 'SQLite'] });
      return { action: 'accept', content: { q0: 'SQLite' } };
    };
    const r = await withTimeout(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'ask me' }] }),
      60_000,
      'the question turn',
    );
    expect(r.stopReason).toBe('end_turn');
    expect(editor.elicitations).toHaveLength(1);
    expect(editor.permissionRequests).toHaveLength(0);
    expect(rig.fake!.lastToolResults().find((t) => t.tool_use_id === 'toolu_ask')?.content).toContain('SQLite');
    const plan = editor.updates.find((u) => u.update.sessionUpdate === 'plan')?.update as acp.Plan | undefined;
    expect(plan?.entries).toEqual([
      { content: 'Pick a database', priority: 'medium', status: 'in_progress' },
      { content: 'Migrate', priority: 'medium', status: 'pending' },
    ]);
    expect(agentText(editor.updates)).toContain('SQLite it is.');
  }, 120_000);

  it('without elicitation, AskUserQuestion falls back to a permission request whose options are the answers', async () => {
    const { rig, editor, sessionId } = await openSession({});
    rig.fake!.setScenario(ASK_SCENARIO);
    editor.onPermission = async (req) => {
      expect(req.toolCall.title).toBe('Which database?');
      expect(req.options.map((o) => o.name)).toEqual(['Postgres', 'SQLite', 'Decline']);
      return select(req.options[1].optionId);
    };
    const r = await withTimeout(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'ask me' }] }),
      60_000,
      'the question turn',
    );
    expect(r.stopReason).toBe('end_turn');
    expect(editor.permissionRequests).toHaveLength(1);
    expect(rig.fake!.lastToolResults().find((t) => t.tool_use_id === 'toolu_ask')?.content).toContain('SQLite');
  }, 120_000);
});

describe('tether acp: bad input', () => {
  it('--help prints the usage; a missing --agent is a usage error; an unreachable gateway fails session/new with a typed error', async () => {
    const help = await runTether(['acp', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: tether acp --agent NAME [--cwd DIR] [--gateway URL --token TOKEN]');
    const missing = await runTether(['acp', '--gateway', 'ws://127.0.0.1:1'], { env: { TETHER_AGENT: '' } });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('missing --agent (or TETHER_AGENT)');

    editor = spawnAcp(['--agent', 'x', '--gateway', 'ws://127.0.0.1:1'], {});
    await editor.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    await expect(editor.agent.request(acp.methods.agent.session.new, { cwd: '/p', mcpServers: [] })).rejects.toMatchObject({
      data: { code: 'UNAVAILABLE' },
    });
    await expect(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId: 'nope', prompt: [{ type: 'text', text: 'x' }] }),
    ).rejects.toMatchObject({ code: -32002 });
  }, 60_000);

  it('session/cancel while a permission request is open withdraws it in the editor and the tool never runs', async () => {
    const { rig, editor: ed, sessionId } = await openSession();
    rig.fake!.setScenario({ responses: [bash('toolu_c', 'cancelled.txt')], fallback: { text: 'after' } });
    ed.onPermission = answersOnlyWhenWithdrawn;
    const prompt = ed.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'write it' }] });
    await waitFor(() => ed.permissionRequests.length === 1, 30_000, 'the permission request');
    await ed.agent.notify(acp.methods.agent.session.cancel, { sessionId });
    expect((await withTimeout(prompt, 30_000, 'the cancelled prompt')).stopReason).toBe('cancelled');
    await waitFor(() => ed.withdrawn.length === 1, 10_000, 'the withdrawal');
    expect(existsSync(join(rig.cwd, 'cancelled.txt'))).toBe(false);
  }, 120_000);
});

describe('tether acp: the engine ends mid-turn', () => {
  it('a teammate stops the session during a prompt: the prompt fails with a typed error instead of hanging', async () => {
    const { rig, editor: ed, sessionId } = await openSession();
    rig.fake!.setScenario({ responses: [{ text: Array.from({ length: 200 }, (_, i) => `w${i}`).join(' '), chunk_delay_ms: 50 }] });
    const prompt = ed.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'talk' }] });
    prompt.catch(() => {});
    await ed.waitFor((u) => agentText(u).includes('w2'), 'the first words');
    await (await (await rig.stack.client()).attach(sessionId)).stop('SIGKILL');
    await expect(withTimeout(prompt, 30_000, 'the prompt to fail')).rejects.toMatchObject({ data: { code: 'UNAVAILABLE' } });
  }, 120_000);
});

describe('tether acp: session/load', () => {
  it('a second editor loads the session: its history arrives as updates before the answer, then it prompts on', async () => {
    rig = await startRig('claude');
    const args = ['--agent', 'test-agent', '--gateway', rig.stack.url];
    const env = { TETHER_TOKEN: rig.stack.token };
    const first = spawnAcp(args, env);
    await first.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const { sessionId } = await first.agent.request(acp.methods.agent.session.new, { cwd: '/editor/project', mcpServers: [] });
    rig.fake!.setScenario({ responses: [{ text: 'Remember the number 42.' }] });
    await withTimeout(
      first.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'a number?' }] }),
      60_000,
      'first editor prompt',
    );
    await first.close(); // the editor goes away; the Tether session stays
    expect(first.exitCode?.()).toBe(0); // tether acp ends by itself on stdin EOF

    editor = spawnAcp(args, env);
    const init = await editor.agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    expect(init.agentCapabilities?.loadSession).toBe(true);
    await withTimeout(
      editor.agent.request(acp.methods.agent.session.load, { sessionId, cwd: '/editor/project', mcpServers: [] }),
      30_000,
      'session/load',
    );
    expect(agentText(editor.updates)).toBe('Remember the number 42.'); // all of it before the answer
    editor.updates.length = 0;
    rig.fake!.setScenario({ responses: [{ text: 'It was 42.' }] });
    const r = await withTimeout(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'which?' }] }),
      60_000,
      'prompt after load',
    );
    expect(r.stopReason).toBe('end_turn');
    expect(agentText(editor.updates)).toBe('It was 42.');
    // A session that does not exist is ACP's "resource not found".
    await expect(
      editor.agent.request(acp.methods.agent.session.load, { sessionId: 'no-such-session', cwd: '/x', mcpServers: [] }),
    ).rejects.toMatchObject({ code: -32002 });
  }, 180_000);
});

/** The HTTP status a refused upgrade gets (fails the test if the upgrade is accepted). */
const upgradeStatus = (url: string) =>
  new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on('unexpected-response', (_req, r) => resolve(r.statusCode ?? 0));
    ws.on('open', () => {
      ws.close();
      reject(new Error(`upgrade of ${url} accepted`));
    });
    ws.on('error', () => {});
  });

describe('/acp at the gateway (experimental): the same SDK client over its own WebSocket client stream', () => {
  const dialAcp = (url: string, token?: string) => {
    const stream = createWebSocketStream(url, {
      WebSocket: WebSocket as unknown as WebSocketConstructor,
      headers: token ? { authorization: `Bearer ${token}` } : {},
    });
    return connectEditor(stream, async () => {});
  };

  it('a prompt with a Bash call allowed over /acp?agent=NAME&cwd=DIR runs in DIR on the agent, as the token holder', async () => {
    rig = await startRig('claude');
    const httpUrl = rig.stack.wsUrl;
    const sub = join(rig.cwd, 'sub');
    mkdirSync(sub);
    editor = dialAcp(`${httpUrl}/acp?agent=test-agent&cwd=${encodeURIComponent(sub)}`, rig.stack.token);
    const init = await withTimeout(
      editor.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} }),
      10_000,
      'initialize over /acp',
    );
    expect(init.agentInfo?.name).toBe('tether');
    const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: '/editor/project', mcpServers: [] });
    expect((await (await rig.stack.client()).listSessions()).map((s) => s.id)).toContain(sessionId);
    rig.fake!.setScenario({
      responses: [bash('toolu_ws', 'over-ws.txt'), bash('toolu_ws2', 'again.txt'), { text: 'Done over WebSocket.' }],
    });
    editor.onPermission = async () => select('allow_always');
    const r = await withTimeout(
      editor.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'write it' }] }),
      60_000,
      'prompt over /acp',
    );
    expect(r.stopReason).toBe('end_turn');
    expect(existsSync(join(sub, 'over-ws.txt'))).toBe(true); // in the folder cwd= named
    expect(existsSync(join(sub, 'again.txt'))).toBe(true);
    expect(editor.permissionRequests).toHaveLength(1); // "allow always": Bash is not asked again in this session
    expect(agentText(editor.updates)).toContain('Done over WebSocket.');
    // The 101 names the connection, as the transport proposal asks.
    const raw = new WebSocket(`${httpUrl}/acp?agent=test-agent`, { headers: { authorization: `Bearer ${rig.stack.token}` } });
    const id = await withTimeout(
      new Promise<string | undefined>((resolve) => raw.on('upgrade', (r) => resolve(r.headers['acp-connection-id'] as string | undefined))),
      10_000,
      'the 101',
    );
    raw.terminate();
    expect(id).toMatch(/\S+/);
  }, 120_000);

  it('takes a one-time ticket like /v1/connect: the first upgrade gets a session, the same ticket again is refused', async () => {
    rig = await startRig('claude');
    const httpBase = rig.stack.wsUrl.replace(/^ws/, 'http');
    const res = await fetch(`${httpBase}/v1/ticket`, { method: 'POST', headers: { authorization: `Bearer ${rig.stack.token}` } });
    const { ticket } = (await res.json()) as { ticket: string };
    const url = `${rig.stack.wsUrl}/acp?agent=test-agent&ticket=${encodeURIComponent(ticket)}`;
    editor = dialAcp(url);
    await withTimeout(
      editor.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} }),
      10_000,
      'initialize with a ticket',
    );
    const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: '/p', mcpServers: [] });
    expect((await (await rig.stack.client()).listSessions()).map((s) => s.id)).toContain(sessionId);
    expect(await upgradeStatus(url)).toBe(401);
  }, 60_000);

  it('refuses an upgrade without a valid token before any ACP', async () => {
    rig = await startRig('claude');
    expect(await upgradeStatus(`${rig.stack.wsUrl}/acp?agent=test-agent`)).toBe(401);
  }, 60_000);
});
