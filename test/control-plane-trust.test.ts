import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteSession } from '../client/remote-session.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { rejectionOf } from './support/items.js';
import { readTurn } from './support/turns.js';
import { waitFor } from './support/wait.js';

/**
 * Issue 27, item 1, through a real gateway and agent with the real CLI, on WebSocket and on
 * gRPC: after the engine started with checked flags, a controller's control requests try to
 * do what the refused flags would (start a program, run hooks, point the engine and its API
 * key elsewhere); the agent's owner decides, in one table (core/engine-controls.ts).
 */

const stdioServer = (marker: string) => ({ x: { type: 'stdio', command: 'sh', args: ['-c', `id > ${marker}`] } });

describe.each(['ws', 'grpc'] as const)('engine control requests from clients, over %s', (transport) => {
  let rig: EngineRig;
  let tmp: TempDir;
  let elsewhere: FakeAnthropic;
  const audit = new MemoryAuditLog();
  beforeAll(async () => {
    rig = await startRig('claude', { responses: [] }, { clientTransport: transport, agentTransport: transport, audit });
    tmp = makeTempDir('tether-controls-');
    elsewhere = await startFakeAnthropic({ responses: [{ text: 'I am the other endpoint.' }] });
  });
  afterAll(async () => {
    await rig?.stop();
    await elsewhere?.close();
    tmp?.cleanup();
  });

  async function ownSession(): Promise<RemoteSession> {
    const client = await rig.stack.client();
    return client.createSession({ agent: 'test-agent' });
  }

  /** One prompt answered by the fake model in words: a turn that fires UserPromptSubmit hooks. */
  async function oneTurn(session: RemoteSession): Promise<void> {
    rig.fake!.setScenario({ responses: [{ text: 'Fine.' }] });
    await session.sendUserMessage('hello');
    await readTurn(session, () => ({ behavior: 'deny', message: 'no tools here' }));
  }

  it("mcp_set_servers with a stdio server is refused in the flags' words; the program never runs; a safe request still works", async () => {
    const marker = join(tmp.path, `mcp-${transport}`);
    const session = await ownSession();
    const err = await rejectionOf(session.request('mcp_set_servers', { servers: stdioServer(marker) }));
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toBe(
      'engine control "mcp_set_servers" is not allowed by agent "test-agent" (it makes the engine start a program); its owner can allow it with --allow-engine-control mcp_set_servers',
    );
    const status = (await session.request('mcp_status')) as { response: { response: { mcpServers: unknown[] } } };
    expect(status.response.response.mcpServers).toEqual([]);
    expect(await session.request('get_context_usage')).toMatchObject({ response: { subtype: 'success' } });
    expect(existsSync(marker)).toBe(false);
    const refused = (await audit.read({ action: 'control', session_id: session.id })).entries.filter((r) => r.result === 'refused');
    expect(refused).toEqual([
      expect.objectContaining({ subtype: 'mcp_set_servers', code: 'PERMISSION_DENIED', decided_by: 'tether:policy' }),
    ]);
    await session.stop();
  });

  it('apply_flag_settings with a hook that runs a command is refused; the hook never runs on the next prompt', async () => {
    const marker = join(tmp.path, `hook-${transport}`);
    const session = await ownSession();
    const hooks = { UserPromptSubmit: [{ hooks: [{ type: 'command', command: `touch ${marker}` }] }] };
    const err = await rejectionOf(session.request('apply_flag_settings', { settings: { hooks } }));
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toContain(
      'engine control "apply_flag_settings" is not allowed by agent "test-agent" (it makes the engine start a program)',
    );
    await oneTurn(session);
    expect(existsSync(marker)).toBe(false);
    await session.stop();
  });

  it('apply_flag_settings with env ANTHROPIC_BASE_URL elsewhere is refused; the other endpoint gets no request (nor the API key)', async () => {
    const session = await ownSession();
    const err = await rejectionOf(session.request('apply_flag_settings', { settings: { env: { ANTHROPIC_BASE_URL: elsewhere.url } } }));
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toContain("(it changes the engine's environment or the endpoint its API key goes to)");
    await oneTurn(session);
    expect(elsewhere.modelRequests()).toEqual([]);
    expect(rig.fake!.modelRequests().length).toBeGreaterThan(0);
    await session.stop();
  });

  it('a subtype Tether does not know is refused at the gateway, not passed through', async () => {
    const session = await ownSession();
    const err = await rejectionOf(session.request('frobnicate', { x: 1 }));
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.message).toContain('engine control "frobnicate" is not one this gateway knows');
    await session.stop();
  });

  it('apply_flag_settings with safe keys only (a model the policy allows) still reaches the engine', async () => {
    const session = await ownSession();
    expect(await session.request('apply_flag_settings', { settings: { model: 'claude-tether-test' } })).toMatchObject({
      response: { subtype: 'success' },
    });
    await session.stop();
  });
});

describe("the agent owner's --allow-engine-control", () => {
  let rig: EngineRig;
  let tmp: TempDir;
  beforeAll(async () => {
    rig = await startRig('claude', { responses: [] }, { agentOptions: { engineControls: { allowControls: ['mcp_set_servers'] } } });
    tmp = makeTempDir('tether-controls-');
  });
  afterAll(async () => {
    await rig?.stop();
    tmp?.cleanup();
  });

  it("lets the session's owner start the server; a controller may not, nor may anyone send what the owner did not allow", async () => {
    const owner = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(owner.id);
    const bobMarker = join(tmp.path, 'bob');
    const err = await rejectionOf(bob.request('mcp_set_servers', { servers: stdioServer(bobMarker) }));
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toContain("may be sent only by the session's owner");
    expect((await rejectionOf(owner.request('reload_plugins'))).message).toContain('--allow-engine-control reload_plugins');
    const viewer = await (await rig.stack.client({ sub: 'carol' })).attach(owner.id, { readOnly: true });
    expect((await rejectionOf(viewer.request('interrupt'))).code).toBe('PERMISSION_DENIED'); // viewers send nothing at all
    const marker = join(tmp.path, 'owner');
    const reply = (await owner.request('mcp_set_servers', { servers: stdioServer(marker) })) as {
      response: { response: { added?: string[] } };
    };
    expect(reply.response.response.added).toEqual(['x']);
    await waitFor(() => existsSync(marker), 15_000, 'the allowed server to start');
    expect(existsSync(bobMarker)).toBe(false);
    await owner.stop();
  });

  it('the agent refuses what it does not allow even when the gateway lets it through (defence in depth)', async () => {
    // A gateway that believes the agent allows more than it does (an older or mistaken gateway).
    rig.stack.gateway.directory.agent('test-agent')!.descriptor.allow_engine_controls = ['mcp_set_servers', 'apply_flag_settings'];
    const marker = join(tmp.path, 'through-the-gateway');
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const err = await rejectionOf(
      session.request('apply_flag_settings', { settings: { statusLine: { type: 'command', command: `touch ${marker}` }, hooks: {} } }),
    );
    expect(err.message).toContain('engine control "apply_flag_settings" is not allowed by agent "test-agent"');
    expect((await session.request('mcp_status')) as Record<string, unknown>).toMatchObject({ response: { subtype: 'success' } });
    expect(existsSync(marker)).toBe(false);
    await session.stop();
  });
});

describe("--setting-sources is the agent owner's choice", () => {
  let rig: EngineRig;
  beforeAll(async () => {
    rig = await startRig('claude', { responses: [] });
  });
  afterAll(() => rig?.stop());

  it.each([['--setting-sources='], ['--setting-sources', 'project']])(
    'extra_args %s … is refused with PERMISSION_DENIED naming the flag',
    async (...args: string[]) => {
      const client = await rig.stack.client();
      const err = await rejectionOf(client.createSession({ agent: 'test-agent', options: { extra_args: args } }));
      expect(err.code).toBe('PERMISSION_DENIED');
      expect(err.message).toContain('engine flag "--setting-sources" is not allowed by agent "test-agent"');
    },
  );
});
