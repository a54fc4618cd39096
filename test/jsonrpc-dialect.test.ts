import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials, loadPackageDefinition, Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { makeTempDir } from './support/claude-cli.js';
import { startTether } from './support/cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { readTurn } from './support/turns.js';
import { FaultProxy } from './support/fault-proxy.js';
import { perTest } from './support/per-test.js';
import { waitFor } from './support/wait.js';
import { SLOW_CONSUMER_REASON } from '../core/rpc/engine.js';

/**
 * The JSON-RPC dialect driven by a thin client written here with nothing but `ws` (or
 * @grpc/grpc-js and the .proto) and JSON.parse: no code of ours is imported by the client.
 * Engine: the real Claude Code CLI against the scripted model. Support code only starts the
 * stack and reads the native client's view of the same session.
 */

type Msg = Record<string, any>;

/** A JSON-RPC 2.0 peer over any text pipe: requests, notifications, and answers to the gateway's requests. */
class ThinClient {
  readonly received: Msg[] = [];
  private nextId = 1;
  private readonly waiters: { test: (m: Msg) => boolean; resolve: (m: Msg) => void }[] = [];
  /** Answers the gateway's requests; `undefined` holds the request unanswered (see reply()). */
  answer: (method: string, params: Msg) => unknown = () => ({});

  constructor(private readonly write: (text: string) => void) {}

  receive(text: string): void {
    const m = JSON.parse(text) as Msg;
    this.received.push(m);
    if (typeof m.method === 'string' && m.id !== undefined) {
      const result = this.answer(m.method, m.params);
      if (result !== undefined) this.reply(m.id, result);
    }
    for (const w of [...this.waiters]) if (w.test(m)) w.resolve(m);
  }

  reply(id: unknown, result: unknown): void {
    this.write(JSON.stringify({ jsonrpc: '2.0', id, result }));
  }

  sendRaw(text: string): void {
    this.write(text);
  }

  /** Sends a request; resolves with the whole response message (result or error). */
  request(method: string, params: unknown, timeoutMs = 60_000): Promise<Msg> {
    const id = this.nextId++;
    this.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return this.waitFor((m) => m.id === id && m.method === undefined, timeoutMs, `the answer to ${method}`);
  }

  waitFor(test: (m: Msg) => boolean, timeoutMs = 30_000, what = 'a message'): Promise<Msg> {
    const seen = this.received.find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = {
        test,
        resolve: (m: Msg) => {
          clearTimeout(t);
          this.waiters.splice(this.waiters.indexOf(w), 1);
          resolve(m);
        },
      };
      const t = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`timed out waiting for ${what}`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  notifications(method: string): Msg[] {
    return this.received.filter((m) => m.method === method && m.id === undefined);
  }
}

interface Pipe {
  client: ThinClient;
  /** The WebSocket subprotocol the gateway answered (ws only). */
  protocol?: string;
  close(): void;
}

async function dialWs(url: string, token: string | undefined): Promise<Pipe & { ws: WebSocket }> {
  const ws = new WebSocket(url, 'tether-jsonrpc.v1', { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const client = new ThinClient((text) => ws.send(text));
  ws.on('message', (data) => client.receive(data.toString()));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  return { client, ws, protocol: ws.protocol, close: () => ws.terminate() };
}

const PROTO = join(__dirname, '..', 'proto', 'tether', 'v1', 'gateway.proto');

async function dialGrpc(
  url: string,
  token: string | undefined,
  dialect = 'jsonrpc',
): Promise<Pipe & { status: Promise<{ code: number; details: string }> }> {
  const pkg = loadPackageDefinition(loadSync(PROTO)) as any;
  const stub = new pkg.tether.v1.Gateway(url.replace(/^grpc:\/\//, ''), credentials.createInsecure());
  const md = new Metadata();
  md.set('tether-dialect', dialect);
  if (token) md.set('authorization', `Bearer ${token}`);
  const call = stub.Connect(md) as ClientDuplexStream<{ json: string }, { json: string }>;
  const client = new ThinClient((text) => call.write({ json: text }));
  call.on('data', (f: { json: string }) => client.receive(f.json));
  call.on('error', () => {});
  const status = new Promise<{ code: number; details: string }>((resolve) => call.on('status', resolve));
  return {
    client,
    status,
    close: () => {
      call.cancel();
      stub.close();
    },
  };
}

const ALL = ['streaming', 'tools', 'permissions', 'questions', 'progress', 'presence', 'session_state'];
const README = 'Tether test README: the answer is 42.';

const scenario = (cwd: string) => ({
  responses: [
    { text: 'Let me read it.', tool_use: { id: 'toolu_read', name: 'Read', input: { file_path: join(cwd, 'README.md') } } },
    { text: 'It says the answer is 42.' },
    { tool_use: { id: 'toolu_b1', name: 'Bash', input: { command: 'touch one.txt', description: 'first file' } } },
    { tool_use: { id: 'toolu_b2', name: 'Bash', input: { command: 'touch one.txt', description: 'the same again' } } },
    { text: 'Both done.' },
  ],
});

/** The rig and the pipes one test opens; the describe block that calls this closes them after each test. */
const rigPerTest = () => perTest(() => ({ rig: undefined as EngineRig | undefined, pipes: [] as Pipe[] }));

describe.each(['ws', 'grpc'] as const)('JSON-RPC dialect over %s, real CLI', (transport) => {
  const case_ = rigPerTest();
  const pipes = case_.pipes;

  it('round trip, session-scoped allow, a native client on the same session, progress only when negotiated', async () => {
    case_.rig = await startRig('claude', { responses: [] });
    case_.rig.fake!.setScenario(scenario(case_.rig.cwd));
    writeFileSync(join(case_.rig.cwd, 'README.md'), README);
    const dial = (t: typeof transport) =>
      t === 'ws' ? dialWs(case_.rig!.stack.wsUrl, case_.rig!.stack.token) : dialGrpc(case_.rig!.stack.grpcUrl, case_.rig!.stack.token);
    const pipe = await dial(transport);
    pipes.push(pipe);
    if (transport === 'ws') expect(pipe.protocol).toBe('tether-jsonrpc.v1');
    const c = pipe.client;

    const init = await c.request('initialize', { protocol_version: '1.0', capabilities: [...ALL, 'future-thing'] });
    expect(init.result.protocol_version).toBe('1.0');
    expect(init.result.capabilities.sort()).toEqual([...ALL].sort());
    const created = await c.request('session_create', { agent: 'test-agent' });
    const sessionId: string = created.result.session_id;
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);

    // An old client: negotiated streaming only (no progress, no tools).
    const old = await dial('ws');
    pipes.push(old);
    expect((await old.client.request('initialize', { protocol_version: '1.0', capabilities: ['streaming'] })).result.capabilities).toEqual([
      'streaming',
    ]);
    expect((await old.client.request('session_attach', { session_id: sessionId })).result.role).toBe('owner');

    // A native client on the same session, through our library.
    const native = await case_.rig.stack.client();
    const nativeSession = await native.attach(sessionId);
    const nativeTurn = readTurn(nativeSession, () => undefined, undefined, 60_000);

    const reply = await c.request('user_message', { session_id: sessionId, content: "What's in README.md?" });
    expect(reply.result).toMatchObject({ status: 'completed' });
    expect(reply.result.usage.input_tokens).toBeGreaterThan(0);
    expect(reply.result.usage.output_tokens).toBeGreaterThan(0);

    // Order: tokens → tool_use_start Read → tool_result → tokens → turn_complete → response.
    const seq = c.received;
    const at = (test: (m: Msg) => boolean, from = 0) => seq.findIndex((m, i) => i >= from && test(m));
    const firstToken = at((m) => m.method === 'assistant_token');
    const toolStart = at((m) => m.method === 'tool_use_start' && m.params.name === 'Read');
    const toolResult = at((m) => m.method === 'tool_result' && m.params.tool_use_id === 'toolu_read');
    const laterToken = at((m) => m.method === 'assistant_token', toolResult);
    const complete = at((m) => m.method === 'turn_complete');
    const response = seq.indexOf(reply);
    expect(firstToken).toBeGreaterThanOrEqual(0);
    expect([firstToken, toolStart, toolResult, laterToken, complete, response]).toEqual(
      [firstToken, toolStart, toolResult, laterToken, complete, response].sort((a, b) => a - b),
    );
    expect(toolStart).toBeGreaterThan(firstToken);
    expect(seq[toolStart].params.input.file_path).toBe(join(case_.rig.cwd, 'README.md'));
    expect(seq[toolResult].params.content).toContain('the answer is 42');
    expect(seq[toolResult].params.is_error).toBe(false);
    const text = (cl: ThinClient) =>
      cl
        .notifications('assistant_token')
        .map((m) => m.params.token)
        .join('');
    expect(text(c)).toBe('Let me read it.It says the answer is 42.');
    expect(seq[complete].params).toMatchObject({ session_id: sessionId, stop_reason: 'end_turn' });
    expect(new Set(c.notifications('assistant_token').map((m) => m.params.message_id)).size).toBe(2);

    // The native client saw the same turn.
    const turn = await nativeTurn;
    expect(turn.result.is_error).toBe(false);
    const nativeTools = turn.messages
      .flatMap((m: any) => (m.type === 'assistant' ? m.message.content : []))
      .filter((b: any) => b.type === 'tool_use');
    expect(nativeTools.map((b: any) => b.id)).toEqual(['toolu_read']);

    // Progress reached the client that asked for it, never the old one; nor did tool events.
    expect(c.notifications('progress').length).toBeGreaterThan(0);
    expect(c.notifications('session_state').length).toBeGreaterThan(0);
    await old.client.waitFor((m) => m.method === 'turn_complete', 10_000, "the old client's turn_complete");
    const oldMethods = new Set(old.client.received.map((m) => m.method).filter(Boolean));
    expect([...oldMethods].sort()).toEqual(['assistant_token', 'turn_complete']);
    expect(text(old.client)).toBe(text(c));

    // The same Bash call twice: one permission_request, answered for the session (the engine's
    // own proposed rule, kept for this session only); the second call is not asked.
    c.answer = (method, params) => {
      expect(method).toBe('permission_request');
      expect(params).toMatchObject({ session_id: sessionId, tool: 'Bash', risk_level: 'high', input: { command: 'touch one.txt' } });
      return { decision: 'allow', scope: 'session' };
    };
    const second = await c.request('user_message', { session_id: sessionId, content: 'Write two files' });
    expect(second.result.status).toBe('completed');
    const asked = c.received.filter((m) => m.method === 'permission_request');
    expect(asked).toHaveLength(1);
    expect(existsSync(join(case_.rig.cwd, 'one.txt'))).toBe(true);
    const results = c.notifications('tool_result').filter((m) => m.params.tool_use_id.startsWith('toolu_b'));
    expect(results.map((m) => [m.params.tool_use_id, m.params.is_error])).toEqual([
      ['toolu_b1', false],
      ['toolu_b2', false],
    ]);
    // The session's audit trail holds the dialect client's prompts and its decision.
    const audit = (await nativeSession.audit()) as Msg[];
    const mine = audit.filter((r) => r.client_id === init.result.client_id);
    expect(mine.filter((r) => r.action === 'prompt')).toHaveLength(2);
    expect(mine.filter((r) => r.action === 'permission_decision').map((r) => r.behavior)).toEqual(['allow']);
    await old.client.waitFor(
      (m) => m.method === 'turn_complete' && old.client.notifications('turn_complete').length === 2,
      10_000,
      'the second turn_complete',
    );
    expect(old.client.received.some((m) => m.method === 'permission_request' || m.method === 'progress')).toBe(false);
  }, 120_000);

  it('queue: a prompt sent mid-turn is queued with its author and priority (queued notification); the owner withdraws one; a withdrawn user_message is answered "withdrawn"; a queued one runs next; interrupt with clear_queue clears the rest', async () => {
    const slow = { text: 'one two three four five six seven eight nine ten', chunk_delay_ms: 200 };
    case_.rig = await startRig('claude', { responses: [slow, { text: 'queue answered' }, slow], fallback: { text: 'OK.' } });
    const pipe =
      transport === 'ws'
        ? await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token)
        : await dialGrpc(case_.rig.stack.grpcUrl, case_.rig.stack.token);
    pipes.push(pipe);
    const c = pipe.client;
    expect((await c.request('initialize', { protocol_version: '1.0', capabilities: ['queue'] })).result.capabilities).toEqual(['queue']);
    const sessionId: string = (await c.request('session_create', { agent: 'test-agent' })).result.session_id;
    const bob = await (await case_.rig.stack.client({ sub: 'bob' })).attach(sessionId);
    const fake = case_.rig.fake!;

    const first = c.request('user_message', { session_id: sessionId, content: 'first prompt' });
    await waitFor(() => fake.textDeltasSent() > 0, 30_000, 'the first answer to stream');
    const b = await bob.send('BOB_QUEUED');
    const mine = '11111111-1111-4111-8111-111111111111';
    const gone = '22222222-2222-4222-8222-222222222222';
    const queuedReply = c.request('user_message', { session_id: sessionId, content: 'MINE_QUEUED', uuid: mine, priority: 'later' });
    const goneReply = c.request('user_message', { session_id: sessionId, content: 'MINE_WITHDRAWN', uuid: gone });
    const three = await c.waitFor((m) => m.method === 'queued' && m.params.prompts.length === 3, 20_000, 'three queued');
    expect(three.params.prompts.map((p: Msg) => [p.principal, p.content, p.priority])).toEqual([
      ['bob', 'BOB_QUEUED', 'later'],
      ['test-user', 'MINE_QUEUED', 'later'],
      ['test-user', 'MINE_WITHDRAWN', 'later'],
    ]);
    expect(three.params.prompts[0].uuid).toBe(b.uuid);

    // The owner may withdraw anyone's; a withdrawn user_message is answered at once.
    expect((await c.request('withdraw', { session_id: sessionId, uuid: b.uuid })).result).toEqual({});
    expect((await c.request('withdraw', { session_id: sessionId, uuid: gone })).result).toEqual({});
    expect((await goneReply).result).toEqual({ status: 'withdrawn', usage: { input_tokens: 0, output_tokens: 0 } });
    const refused = await c.request('withdraw', { session_id: sessionId, uuid: 'no-such-prompt' });
    expect(refused.error.data.code).toBe('FAILED_PRECONDITION');

    expect((await first).result.status).toBe('completed');
    expect((await queuedReply).result.status).toBe('completed');
    const started = await c.waitFor(
      (m) => m.method === 'queued' && m.params.change.action === 'started',
      20_000,
      'the queued prompt to start',
    );
    expect(started.params).toMatchObject({ prompts: [], change: { uuids: [mine], by: 'test-user' } });
    for (const text of ['BOB_QUEUED', 'MINE_WITHDRAWN']) expect(fake.requests.some((r) => r.raw.includes(text))).toBe(false);
    expect(fake.modelRequests().at(-1)!.raw).toContain('MINE_QUEUED');

    // A stop that clears the queue: the cleared user_message is answered withdrawn, the running one interrupted.
    const deltas = fake.textDeltasSent();
    const running = c.request('user_message', { session_id: sessionId, content: 'a slow one' });
    await waitFor(() => fake.textDeltasSent() > deltas, 30_000, 'the third answer to stream');
    const cleared = c.request('user_message', { session_id: sessionId, content: 'CLEARED_BY_STOP' });
    await c.waitFor(
      (m) => m.method === 'queued' && m.params.prompts.some((p: Msg) => p.content === 'CLEARED_BY_STOP'),
      20_000,
      'the prompt queued',
    );
    expect((await c.request('interrupt', { session_id: sessionId, clear_queue: true })).result).toEqual({});
    expect((await cleared).result.status).toBe('withdrawn');
    expect((await running).result.status).toBe('interrupted');
    expect(c.notifications('queued').at(-1)!.params.change).toMatchObject({ action: 'cleared', by: 'test-user' });
    expect(fake.requests.some((r) => r.raw.includes('CLEARED_BY_STOP'))).toBe(false);
  }, 120_000);
});

describe('JSON-RPC dialect with the real CLI: questions, shared prompts, viewers, interrupt, model and mode', () => {
  const case_ = rigPerTest();
  const pipes = case_.pipes;

  it('AskUserQuestion is a request answered with answers; a prompt answered natively is withdrawn from the dialect client; a viewer is never asked', async () => {
    const question = {
      question: 'Which database should we use?',
      header: 'Database',
      options: [
        { label: 'Postgres', description: 'Relational' },
        { label: 'SQLite', description: 'Embedded' },
      ],
      multiSelect: false,
    };
    case_.rig = await startRig('claude', {
      responses: [
        { tool_use: { id: 'toolu_ask', name: 'AskUserQuestion', input: { questions: [question] } } },
        { text: 'SQLite it is.' },
        { tool_use: { id: 'toolu_x', name: 'Bash', input: { command: 'echo x >> x.txt', description: 'append' } } },
        { text: 'Appended.' },
        { text: 'one two three four five six seven eight nine ten eleven twelve', chunk_delay_ms: 150 },
      ],
    });
    const pipe = await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token);
    pipes.push(pipe);
    const c = pipe.client;
    await c.request('initialize', { protocol_version: '1.0', capabilities: ALL });
    const sessionId: string = (await c.request('session_create', { agent: 'test-agent', cwd: case_.rig.cwd })).result.session_id;

    // A viewer (token: view only) with every capability is attached too.
    const viewerPipe = await dialWs(
      case_.rig.stack.wsUrl,
      await case_.rig.stack.mint({ kind: 'client', sub: 'viewer-vic', scopes: ['view'] }),
    );
    pipes.push(viewerPipe);
    await viewerPipe.client.request('initialize', { protocol_version: '1.0', capabilities: ALL });
    expect((await viewerPipe.client.request('session_attach', { session_id: sessionId })).result.role).toBe('viewer');
    expect((await viewerPipe.client.request('user_message', { session_id: sessionId, content: 'hi' })).error.message).toMatch(
      /may not control/,
    );

    c.answer = (method, params) => {
      expect(method).toBe('user_question');
      expect(params.questions).toEqual([question]);
      return { answers: { [question.question]: 'SQLite' } };
    };
    expect((await c.request('user_message', { session_id: sessionId, content: 'Pick a database' })).result.status).toBe('completed');
    expect(case_.rig.fake!.lastToolResults().find((r) => r.tool_use_id === 'toolu_ask')?.content).toContain('SQLite');

    // The owner's native client answers first; the dialect client's request is withdrawn and its late answer changes nothing.
    let held: Msg | undefined;
    c.answer = (method, params) => {
      held = { method, params };
      return undefined;
    };
    const native = await case_.rig.stack.client();
    const lastSeq = (await native.listSessions()).find((x) => x.id === sessionId)!.last_seq;
    const nativeSession = await native.attach(sessionId, { fromSeq: lastSeq + 1 });
    const nativeTurn = readTurn(
      nativeSession,
      (p) => (p.toolName === 'Bash' ? { behavior: 'allow', updatedInput: p.input } : undefined),
      undefined,
      60_000,
    );
    const turn = c.request('user_message', { session_id: sessionId, content: 'Append x' });
    const withdrawn = await c.waitFor((m) => m.method === 'permission_withdrawn', 30_000, 'permission_withdrawn');
    const asked = c.received.find((m) => m.method === 'permission_request')!;
    expect(held?.method).toBe('permission_request');
    expect(withdrawn.params).toMatchObject({ session_id: sessionId, id: asked.id });
    c.reply(asked.id, { decision: 'deny', scope: 'once', message: 'too late' });
    expect((await turn).result.status).toBe('completed');
    expect((await nativeTurn).result.is_error).toBe(false);
    expect(readFileSync(join(case_.rig.cwd, 'x.txt'), 'utf8')).toBe('x\n'); // ran once, allowed
    expect(viewerPipe.client.received.some((m) => m.method === 'permission_request' || m.method === 'user_question')).toBe(false);

    // The engine as system/init reported it.
    const info = await viewerPipe.client.request('initialize', { protocol_version: '1.0', capabilities: [], session_id: sessionId });
    expect(info.result.tools).toEqual(expect.arrayContaining(['Bash', 'Read', 'AskUserQuestion']));
    expect(typeof info.result.model).toBe('string');
    expect(Array.isArray(info.result.mcp_servers)).toBe(true);
    expect(case_.rig.stack.gateway.directory.get(sessionId)!.engineInfo).toEqual({
      model: info.result.model,
      tools: info.result.tools,
      mcp_servers: info.result.mcp_servers,
    }); // kept on the session: it dies with it

    // The viewer drops off; it will resume from the last seq it saw.
    const lastSeen = Math.max(...viewerPipe.client.received.map((m) => m.params?.seq ?? 0));
    viewerPipe.close();

    // Interrupt while tokens stream: the turn ends "interrupted".
    const slow = c.request('user_message', { session_id: sessionId, content: 'Count slowly' });
    await c.waitFor((m) => m.method === 'assistant_token' && m.params.token.includes('one'), 30_000, 'the first slow token');
    expect((await c.request('interrupt', { session_id: sessionId })).result).toEqual({});
    expect((await slow).result.status).toBe('interrupted');

    const back = await dialWs(case_.rig.stack.wsUrl, await case_.rig.stack.mint({ kind: 'client', sub: 'viewer-vic', scopes: ['view'] }));
    pipes.push(back);
    await back.client.request('initialize', { protocol_version: '1.0', capabilities: ['streaming'] });
    await back.client.request('session_attach', { session_id: sessionId, from_seq: lastSeen + 1 });
    await back.client.waitFor((m) => m.method === 'turn_complete', 10_000, 'the missed turn_complete');
    const missed = (cl: ThinClient) =>
      cl
        .notifications('assistant_token')
        .filter((m) => m.params.seq > lastSeen)
        .map((m) => m.params.token)
        .join('');
    expect(back.client.notifications('assistant_token').every((m) => m.params.seq > lastSeen)).toBe(true);
    expect(missed(back.client)).toBe(missed(c));
    expect(missed(c)).toMatch(/^one/);

    expect((await c.request('set_permission_mode', { session_id: sessionId, mode: 'acceptEdits' })).result).toEqual({
      mode: 'acceptEdits',
    });
    expect((await c.request('set_model', { session_id: sessionId, model: 'claude-sonnet-4-5' })).result.model).toBe('claude-sonnet-4-5');
    const listed = (await c.request('session_list', {})).result.sessions;
    expect(listed).toEqual([expect.objectContaining({ session_id: sessionId, agent: 'test-agent', owner: 'test-user' })]);
  }, 120_000);
});

describe('JSON-RPC dialect: malformed input and the printed URL', () => {
  const case_ = rigPerTest();
  const pipes = case_.pipes;

  it('answers malformed requests with the standard JSON-RPC error codes and stays usable', async () => {
    case_.rig = await startRig('demo');
    const pipe = await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token);
    pipes.push(pipe);
    const c = pipe.client;
    const errorAfter = async (raw: string) => {
      const n = c.received.length;
      c.sendRaw(raw);
      return c.waitFor((m) => c.received.indexOf(m) >= n && m.error !== undefined, 5_000, `an error for ${raw}`);
    };
    expect((await errorAfter('{not json')).error.code).toBe(-32700);
    expect((await errorAfter('{not json')).id).toBeNull();
    expect((await errorAfter('[1,2]')).error.code).toBe(-32600);
    // Invalid Request is answered with id null (docs/protocol.md, as JSON-RPC 2.0 says), even when the id was readable.
    expect(await errorAfter('{"jsonrpc":"1.0","id":"raw-3","method":"initialize"}')).toMatchObject({ id: null, error: { code: -32600 } });
    expect(await errorAfter('{"jsonrpc":"2.0","id":"raw-4","method":42}')).toMatchObject({ id: null, error: { code: -32600 } });
    expect((await c.request('no_such_method', {})).error.code).toBe(-32601);
    expect((await c.request('initialize', { capabilities: 'all' })).error.code).toBe(-32602);
    expect((await c.request('initialize', { protocol_version: '9.0' })).error.code).toBe(-32602);
    // Before initialize nothing else is served.
    expect((await c.request('session_list', {})).error.message).toMatch(/initialize first/);
    expect((await c.request('initialize', { protocol_version: '1.0', capabilities: [] })).result.protocol_version).toBe('1.0');
    expect((await c.request('user_message', { session_id: 'x' })).error.code).toBe(-32602);
    expect((await c.request('user_message', { session_id: 'nope', content: 'hi' })).error.message).toMatch(/no session nope/);
    expect((await c.request('session_list', {})).result).toEqual({ sessions: [] });
  });

  it('a client gone before its session_create is answered leaves no engine running', async () => {
    case_.rig = await startRig('demo');
    const pipe = await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token);
    await pipe.client.request('initialize', { protocol_version: '1.0' });
    pipe.client.sendRaw(JSON.stringify({ jsonrpc: '2.0', id: 'c', method: 'session_create', params: { agent: 'test-agent' } }));
    pipe.close();
    const dir = case_.rig.stack.gateway.directory;
    await waitFor(() => dir.sessionList().some((x) => x.ended), 5_000, 'the session to end');
    expect(dir.sessionList().map((x) => x.currentState)).toEqual(['ended']);
  });

  it('session_create with worktree: the answer says where the session works; a branch that reads as an option is refused', async () => {
    case_.rig = await startRig('demo');
    const repo = case_.rig.cwd;
    const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', timeout: 20_000 }).trim();
    git('init', '-q', '-b', 'main');
    git('-c', 'user.email=t@example.com', '-c', 'user.name=T', 'commit', '-q', '--allow-empty', '-m', 'first');
    const pipe = await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token);
    pipes.push(pipe);
    await pipe.client.request('initialize', { protocol_version: '1.0' });
    const made = (await pipe.client.request('session_create', { agent: 'test-agent', cwd: repo, worktree: { branch: 'rpc/one' } })).result;
    expect(made.worktree).toEqual({
      path: join(realpathSync(repo), '.tether-worktrees', made.session_id),
      branch: 'rpc/one',
      base: git('rev-parse', 'HEAD'),
      repository: realpathSync(repo),
      state: 'active',
    });
    const refused = await pipe.client.request('session_create', { agent: 'test-agent', cwd: repo, worktree: { branch: '-D' } });
    expect(refused.error.code).toBe(-32602);
    expect(refused.error.message).toContain('not starting with "-"');
  });

  it('session_attach from a position the gateway no longer holds says so (gap) and replays the rest', async () => {
    case_.rig = await startRig('demo', undefined, { limits: { replay: { maxFrames: 4, maxBytes: 1024 * 1024 } } });
    const a = await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token);
    pipes.push(a);
    await a.client.request('initialize', { protocol_version: '1.0', capabilities: ['streaming'] });
    const sessionId = (await a.client.request('session_create', { agent: 'test-agent' })).result.session_id;
    expect((await a.client.request('user_message', { session_id: sessionId, content: 'hello' })).result.status).toBe('completed');
    const b = await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token);
    pipes.push(b);
    await b.client.request('initialize', { protocol_version: '1.0', capabilities: ['session_state', 'presence', 'streaming'] });
    const attached = (await b.client.request('session_attach', { session_id: sessionId, from_seq: 1 })).result;
    expect(attached.gap.from_seq).toBe(1);
    expect(attached.gap.to_seq).toBeGreaterThan(1);
    expect(attached.gap.to_seq).toBeLessThan(attached.next_seq - 1);
    const replayed = b.client.received.filter((m) => m.params?.seq !== undefined).map((m) => m.params.seq);
    expect(replayed.length).toBeGreaterThan(0);
    expect(Math.min(...replayed)).toBeGreaterThan(attached.gap.to_seq);
  });

  it('a dialect client that stops reading is cut at its limit (4008); the session and a reading client go on', async () => {
    // Answers of 2 MiB each: the stuck client's queue passes 256 KiB once the loopback buffers are full.
    case_.rig = await startRig(
      'claude',
      { responses: [], fallback: { text: 'y'.repeat(2 * 1024 * 1024) } },
      { limits: { slowClientBytes: 256 * 1024 } },
    );
    const reader = await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token);
    // The slow client's bytes pass a proxy that can hold them, as a client that stops reading would.
    const proxy = await FaultProxy.start({ targetPort: Number(new URL(case_.rig.stack.wsUrl).port), maxBufferedBytes: 64 * 1024 });
    const viaProxy = await dialWs(proxy.url('ws'), case_.rig.stack.token);
    const slow = { ...viaProxy, close: () => (viaProxy.close(), void proxy.close()) };
    pipes.push(reader, slow);
    await reader.client.request('initialize', { protocol_version: '1.0', capabilities: ['streaming'] });
    const sessionId = (await reader.client.request('session_create', { agent: 'test-agent' })).result.session_id;
    const { client_id } = (await slow.client.request('initialize', { protocol_version: '1.0', capabilities: ['streaming'] })).result;
    await slow.client.request('session_attach', { session_id: sessionId });
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      slow.ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })),
    );
    proxy.stall('down');
    const gw = case_.rig.stack.gateway.directory.get(sessionId)!;
    for (let n = 0; n < 12 && gw.roleOf(client_id) !== undefined; n++) {
      expect((await reader.client.request('user_message', { session_id: sessionId, content: `answer ${n}` })).result.status).toBe(
        'completed',
      );
    }
    expect(gw.roleOf(client_id)).toBeUndefined();
    proxy.resume('down');
    expect(await closed).toEqual({ code: 4008, reason: SLOW_CONSUMER_REASON }); // the one rule and reason of core/rpc/engine.ts
    expect((await reader.client.request('user_message', { session_id: sessionId, content: 'still there?' })).result.status).toBe(
      'completed',
    );
  }, 90_000);

  it('gRPC: an unknown tether-dialect is refused with INVALID_ARGUMENT', async () => {
    case_.rig = await startRig('demo');
    const pipe = await dialGrpc(case_.rig.stack.grpcUrl, case_.rig.stack.token, 'xml-rpc');
    pipes.push(pipe);
    const status = await pipe.status;
    expect(status.code).toBe(3);
    expect(status.details).toContain('unknown tether-dialect "xml-rpc"');
  });

  it('an agent token is refused; a client that never initializes is closed', async () => {
    case_.rig = await startRig('demo', undefined, { limits: { helloTimeoutMs: 300 } });
    const closeCode = (ws: WebSocket) => new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    const agentWs = new WebSocket(case_.rig.stack.wsUrl, 'tether-jsonrpc.v1', {
      headers: { authorization: `Bearer ${await case_.rig.stack.mint({ kind: 'agent', sub: 'other-agent' })}` },
    });
    expect(await closeCode(agentWs)).toBe(4403);
    const silent = new WebSocket(case_.rig.stack.wsUrl, 'tether-jsonrpc.v1', {
      headers: { authorization: `Bearer ${case_.rig.stack.token}` },
    });
    expect(await closeCode(silent)).toBe(4004);
  });

  it('the bare ws://HOST:PORT that tether up prints takes the upgrade; without the token it is refused', async () => {
    case_.rig = await startRig('demo');
    expect(new URL(case_.rig.stack.wsUrl).pathname).toBe('/');
    const pipe = await dialWs(case_.rig.stack.wsUrl, case_.rig.stack.token);
    pipes.push(pipe);
    expect((await pipe.client.request('initialize', { protocol_version: '1.0' })).result.principal).toBe('test-user');
    await expect(dialWs(case_.rig.stack.wsUrl, undefined)).rejects.toThrow(/401/);

    // A browser: a single-use ticket from the same origin, then the bare URL with ?ticket=.
    const origin = case_.rig.stack.wsUrl.replace(/^ws/, 'http');
    const res = await fetch(`${origin}/v1/ticket`, {
      method: 'POST',
      headers: { authorization: `Bearer ${case_.rig.stack.token}`, origin },
    });
    const { ticket } = (await res.json()) as { ticket: string };
    const ws = new WebSocket(`${case_.rig.stack.wsUrl}/?ticket=${encodeURIComponent(ticket)}`, 'tether-jsonrpc.v1', {
      headers: { origin },
    });
    const browser = new ThinClient((text) => ws.send(text));
    ws.on('message', (data) => browser.receive(data.toString()));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    pipes.push({ client: browser, close: () => ws.terminate() });
    expect((await browser.request('initialize', { protocol_version: '1.0' })).result.principal).toBe('test-user');
  });

  it('a thin client dials the URL `tether up` prints, as printed, and runs a turn; GET / is still the web page', async () => {
    const dir = makeTempDir('tether-up-');
    const state = makeTempDir('tether-state-');
    const up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', dir.path, '--state-dir', state.path]);
    try {
      const url = (await up.line('gateway: ')).slice('gateway: '.length);
      const token = (await up.line('token: ')).slice('token: '.length);
      expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
      const page = await fetch(url.replace(/^ws/, 'http'));
      expect(page.headers.get('content-type')).toContain('text/html');
      const pipe = await dialWs(url, token);
      pipes.push(pipe);
      expect(pipe.protocol).toBe('tether-jsonrpc.v1');
      await pipe.client.request('initialize', { protocol_version: '1.0', capabilities: ['streaming'] });
      const sessionId = (await pipe.client.request('session_create', { agent: 'local' })).result.session_id;
      expect((await pipe.client.request('user_message', { session_id: sessionId, content: 'hello there' })).result.status).toBe(
        'completed',
      );
      expect(
        pipe.client
          .notifications('assistant_token')
          .map((m) => m.params.token)
          .join(''),
      ).toContain('You said: hello there');
    } finally {
      for (const p of pipes.splice(0)) p.close();
      await up.stop('SIGTERM');
      dir.cleanup();
      state.cleanup();
    }
  }, 60_000);
});
