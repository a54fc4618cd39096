import { query, type SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultInitialize, mergeInitialize, NO_CONTRIBUTION, type InitializeContribution } from '../agent/initialize-merge.js';
import { withRemoteEngine } from '../client/remote-spawn.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { SDK_ENV_SWITCHES } from '../core/protocol/sdk-env.js';
import {
  claudeBinaryPath,
  claudeTestEnv,
  makeTempDir,
  spawnClaude,
  type ClaudeProcess,
  type Frame,
  type TempDir,
} from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { runTether } from './support/cli.js';
import { until } from './support/items.js';
import { localAndRemote } from './support/local-and-remote.js';
import { diffObservations, normalize, TETHER_CLAUDE, type Observation } from './support/side-by-side.js';
import { startStack, withTimeout, type Stack } from './support/stack.js';

/**
 * Issue 16, the differences the side-by-side suite does not cover: one initialize per engine
 * (seen from the engine), the SDK's environment switches and nothing else, the Python SDK's
 * exact argv + environment + initialize through tether-claude, `tether-claude -v`, and the
 * SDK's own `stderr` option with the engine on a remote agent.
 */

const ECHO_ENGINE = fileURLToPath(new URL('./support/misbehaving-engine.mjs', import.meta.url));

interface PythonQuery {
  argv: string[];
  env_added: Record<string, string>;
  initialize: Frame;
  user: Frame;
  version_check: { args: string[]; timeout_ms: number; pattern: string; minimum: string };
}
const PY = JSON.parse(readFileSync(new URL('./fixtures/python-sdk/query.json', import.meta.url), 'utf8')) as PythonQuery;

/** The environment the bare CLI gets in these tests, without what only the TypeScript SDK sets. */
function bareEnv(home: string, baseUrl: string): Record<string, string> {
  const { CLAUDE_CODE_SDK_READS_SESSION_STATE: _ts, ...rest } = claudeTestEnv({ home, baseUrl });
  return rest;
}

const engineItems = (items: SessionItem[]): Frame[] =>
  items.flatMap((i) => (i.kind === 'engine' && i.origin === 'engine' ? [i.message as Frame] : []));

describe("one initialize per engine, the client's own (seen by an engine that echoes its stdin)", () => {
  let stack: Stack | undefined;
  beforeAll(async () => {
    // The operator's environment carries an SDK switch: the agent must not pass it on by itself.
    stack = await startStack({
      engine: 'claude',
      engineCommand: ECHO_ENGINE,
      engineEnv: { MISBEHAVE_MODE: 'echo-env', CLAUDE_CODE_SDK_READS_SESSION_STATE: '1' },
    });
  });
  afterAll(async () => stack?.stop());

  async function open(
    options: Record<string, unknown>,
  ): Promise<{ session: RemoteSession; it: AsyncIterator<SessionItem>; items: SessionItem[] }> {
    const client = await stack!.client();
    const session = await client.createSession({ agent: 'test-agent', options });
    return { session, it: session[Symbol.asyncIterator](), items: [] };
  }
  const echoes = (n: number) => (items: SessionItem[]) => engineItems(items).filter((f) => f.type === 'echo').length >= n;

  it('a client that brings its initialize: the engine reads it first and only it, with the switches it asked for and no others', async () => {
    const { session, it, items } = await open({
      client_initialize: true,
      env: { CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING: 'true', CLAUDE_CODE_ENTRYPOINT: 'sdk-ts' },
    });
    const init = {
      type: 'control_request',
      request_id: 'sdk_init_1',
      request: { subtype: 'initialize', hooks: null, systemPrompt: 'mine', agents: { a: { description: 'd', prompt: 'p' } } },
    };
    await session.send(init);
    await session.send({ type: 'user', message: { role: 'user', content: 'hi' }, parent_tool_use_id: null, session_id: '' });
    await until(it, () => echoes(2)(items), items, 10_000, 'two echoes');
    const seen = engineItems(items).filter((f) => f.type === 'echo');
    // (the gateway gives a client's control request an id of its own: docs/protocol.md)
    expect(seen.map((f) => f.got)).toEqual([{ ...init, request_id: expect.any(String) }, expect.objectContaining({ type: 'user' })]);
    expect(seen[0].env).toEqual({ CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING: 'true', CLAUDE_CODE_ENTRYPOINT: 'sdk-ts' });
    await session.stop();
  });

  it("a client that promised one but sends a user message first: the agent's default goes first, its answer never reaches the client", async () => {
    const { session, it, items } = await open({ client_initialize: true });
    await session.send({ type: 'user', message: { role: 'user', content: 'hi' }, parent_tool_use_id: null, session_id: '' });
    await until(it, () => echoes(2)(items), items, 10_000, 'two echoes');
    const seen = engineItems(items).filter((f) => f.type === 'echo');
    expect(seen[0].got).toEqual({
      type: 'control_request',
      request_id: 'tether_agent_init',
      request: { subtype: 'initialize', hooks: null },
    });
    expect(seen[1].got).toMatchObject({ type: 'user' });
    expect(seen[0].env).toEqual({}); // no switch asked for, none set (the agent's own CLAUDE_CODE_SDK_READS_SESSION_STATE is stripped)
    await session.stop();
  });

  it("tether chat --json --client-initialize: the first line is the engine's first initialize; without --json it is refused", async () => {
    const init = {
      type: 'control_request',
      request_id: 'pipe_init',
      request: { subtype: 'initialize', hooks: null, appendSystemPrompt: 'pipe' },
    };
    const env = { TETHER_GATEWAY: stack!.url, TETHER_TOKEN: stack!.token };
    const r = await runTether(['chat', '--agent', 'test-agent', '--json', '--client-initialize'], {
      env,
      input: JSON.stringify(init) + '\n',
      timeoutMs: 20_000,
    });
    const echoes = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Frame)
      .filter((f) => f.type === 'echo');
    expect(
      echoes.map((f) => f.got.request?.subtype),
      r.stderr,
    ).toEqual(['initialize']);
    expect(echoes[0].got.request).toEqual(init.request);
    const refused = await runTether(['chat', '--agent', 'test-agent', '--client-initialize'], { env, input: '', timeoutMs: 20_000 });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('--client-initialize needs --json');
  });

  it('an env key off the allow list, or a value with a line break, is refused at create', async () => {
    const client = await stack!.client();
    const before = (await client.listSessions()).length;
    await expect(client.createSession({ agent: 'test-agent', options: { env: { LD_PRELOAD: '/x.so' } as never } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(client.createSession({ agent: 'test-agent', options: { env: { TRACEPARENT: 'a\nb' } } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(client.createSession({ agent: 'test-agent', options: { env: { TRACESTATE: 'x'.repeat(1025) } } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect((await client.listSessions()).length).toBe(before);
  });
});

describe('initialize merge (the seam the central-policy hook will use)', () => {
  const policy: InitializeContribution = { hooks: { PreToolUse: [{ hookCallbackIds: ['tether_policy_0'], onFailure: 'block' }] } };
  const client = { subtype: 'initialize', hooks: { PreToolUse: [{ matcher: 'Bash', hookCallbackIds: ['hook_0'] }] }, systemPrompt: 'app' };

  it("adds nothing today: the client's request goes through as sent, and the default is the agent's handshake of old", () => {
    expect(mergeInitialize(client, NO_CONTRIBUTION, true)).toBe(client);
    expect(defaultInitialize(NO_CONTRIBUTION)).toEqual({ subtype: 'initialize', hooks: null });
  });

  it("a contribution is appended after the client's own hooks, and a re-initialize cannot remove it", () => {
    expect(mergeInitialize(client, policy, true)).toEqual({
      ...client,
      hooks: { PreToolUse: [...client.hooks.PreToolUse, ...policy.hooks!.PreToolUse] },
    });
    expect(mergeInitialize({ subtype: 'initialize', hooks: null }, policy, true).hooks).toEqual(policy.hooks);
    expect(mergeInitialize({ subtype: 'initialize', hooks: {} }, policy, false).hooks).toEqual(policy.hooks); // {} would remove all
    expect(mergeInitialize({ subtype: 'initialize', hooks: null }, policy, false)).toEqual({ subtype: 'initialize', hooks: null }); // null keeps the set
  });

  it("the allow list is the switches read from the SDKs' source, and no credentials or paths", () => {
    expect(SDK_ENV_SWITCHES).toContain('CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING');
    for (const k of [
      'CLAUDE_CODE_SDK_HAS_OAUTH_REFRESH',
      'CLAUDE_CODE_SDK_HAS_HOST_AUTH_REFRESH',
      'CLAUDE_CONFIG_DIR',
      'ANTHROPIC_API_KEY',
      'DEBUG',
      'PWD',
    ])
      expect(SDK_ENV_SWITCHES).not.toContain(k);
  });
});

describe('the Python SDK through tether-claude: its argv, environment and initialize (test/fixtures/python-sdk)', () => {
  let rig: EngineRig | undefined;
  let localFake: FakeAnthropic | undefined;
  const dirs: TempDir[] = [];
  const procs: ClaudeProcess[] = [];
  beforeAll(async () => {
    rig = await startRig('claude', { responses: [{ text: 'Hi from Python.' }] });
    localFake = await startFakeAnthropic({ responses: [{ text: 'Hi from Python.' }] });
  }, 30_000);
  afterAll(async () => {
    await Promise.allSettled(procs.map((p) => p.kill()));
    await rig?.stop();
    await localFake?.close();
    for (const d of dirs) d.cleanup();
  });

  /** Plays the Python SDK's side: initialize, the prompt once it is answered, EOF after the result. */
  async function converse(cli: ClaudeProcess): Promise<Frame[]> {
    procs.push(cli);
    cli.send(PY.initialize);
    await cli.waitFor((f) => f.type === 'control_response' && f.response?.request_id === PY.initialize.request_id, 20_000);
    cli.send(PY.user);
    await cli.waitFor((f) => f.type === 'result', 20_000);
    cli.closeStdin();
    const exit = await cli.waitForExit(15_000);
    expect(exit.code, cli.stderr()).toBe(0);
    return cli.frames;
  }

  it("the model gets the same system prompt, the app's agent is there, and the frames are the bare CLI's (no session_state_changed)", async () => {
    const home = makeTempDir('tether-py-home-');
    const cwdLocal = makeTempDir('tether-py-cwd-');
    const cwdRemote = makeTempDir('tether-py-cwd-');
    dirs.push(home, cwdLocal, cwdRemote);
    const local = await converse(
      spawnClaude({ cwd: cwdLocal.path, args: PY.argv, env: { ...bareEnv(home.path, localFake!.url), ...PY.env_added } }),
    );
    const env = {
      PATH: process.env.PATH ?? '',
      TETHER_GATEWAY: rig!.stack.url,
      TETHER_AGENT: 'test-agent',
      TETHER_TOKEN: rig!.stack.token ?? '',
      TETHER_CWD: cwdRemote.path,
      ...PY.env_added,
    };
    const remote = await converse(spawnClaude({ command: process.execPath, cwd: cwdRemote.path, args: [TETHER_CLAUDE, ...PY.argv], env }));

    const observe = (frames: Frame[], fake: FakeAnthropic, cwd: string, homeDir: string): Observation =>
      normalize(
        {
          api: fake
            .modelRequests()
            .map((r) => ({ model: r.model, system: r.system, tools: r.toolNames, toolDescriptions: r.toolDescriptions })),
          stream: frames.filter((f) => f.type !== 'control_response'),
          result: frames.find((f) => f.type === 'result') ?? null,
          notes: { initialize: frames.find((f) => f.type === 'control_response')?.response?.response?.agents },
        },
        [
          [cwd, '<cwd>'],
          [cwd.replace(/[^A-Za-z0-9]/g, '-'), '<cwd-slug>'],
          [homeDir, '<home>'],
          [fake.url, '<fake>'],
        ],
      ) as Observation;
    const a = observe(local, localFake!, cwdLocal.path, home.path);
    const b = observe(remote, rig!.fake!, cwdRemote.path, rig!.home!);
    expect(a.api[0].system).toContain('MARK-PY-SYSTEM');
    const init = remote.find((f) => f.type === 'system' && f.subtype === 'init');
    expect(init?.agents).toContain('py-helper');
    expect(remote.filter((f) => f.subtype === 'session_state_changed')).toEqual([]);
    expect(diffObservations(a, b)).toEqual([]);
  }, 60_000);

  it('tether-claude -v prints what the remote `claude -v` prints, within the 2 s the Python SDK allows, and passes its >= 2.0.0 check', async () => {
    const run = (cmd: string, args: string[], env: NodeJS.ProcessEnv) =>
      new Promise<{ out: string; ms: number; code: number | null }>((resolve) => {
        const t0 = Date.now();
        const child = execFile(cmd, args, { env, timeout: 10_000 }, (err, stdout) =>
          resolve({ out: String(stdout), ms: Date.now() - t0, code: err ? ((err as { code?: number }).code ?? 1) : 0 }),
        );
        child.stdin?.end();
      });
    const bare = await run(claudeBinaryPath(), PY.version_check.args, { PATH: process.env.PATH });
    const tetherEnv = {
      PATH: process.env.PATH,
      TETHER_GATEWAY: rig!.stack.url,
      TETHER_AGENT: 'test-agent',
      TETHER_TOKEN: rig!.stack.token,
    };
    // Best of three: what the lookup costs, not how busy the shared test machine is at that moment.
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await run(process.execPath, [TETHER_CLAUDE, ...PY.version_check.args], tetherEnv));
    const viaTether = runs.reduce((a, b) => (b.ms < a.ms ? b : a));
    for (const r of runs) expect({ code: r.code, out: r.out }).toEqual({ code: 0, out: bare.out });
    expect(viaTether.ms).toBeLessThan(PY.version_check.timeout_ms);
    const version = new RegExp(PY.version_check.pattern).exec(viaTether.out.trim())?.[1] ?? '0.0.0';
    const atLeast = (v: string, min: string) => {
      const [x, y] = [v.split('.').map(Number), min.split('.').map(Number)];
      for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] > y[i];
      return true;
    };
    expect(atLeast(version, PY.version_check.minimum)).toBe(true);
    const long = await run(process.execPath, [TETHER_CLAUDE, '--version'], {
      PATH: process.env.PATH,
      TETHER_GATEWAY: rig!.stack.url,
      TETHER_AGENT: 'test-agent',
      TETHER_TOKEN: rig!.stack.token,
    });
    expect(long.out).toBe(bare.out);
  }, 30_000);
});

describe("the SDK's own stderr option, engine on a remote agent", () => {
  const start = localAndRemote();

  it("withRemoteEngine: options.stderr receives the engine's stderr as it does from a local CLI", async () => {
    const unknown = '6e55a0d1-0000-4000-8000-00000000ffff';
    const { local: localOptions, rig } = await start({ responses: [] });
    let localErr = '';
    const local = await runQuery({ ...localOptions, resume: unknown, stderr: (t) => void (localErr += t) });
    let remoteErr = '';
    const remote = await runQuery(
      withRemoteEngine(
        { resume: unknown, stderr: (t: string) => void (remoteErr += t) },
        { gateway: rig.stack.url, token: rig.stack.token, agent: 'test-agent', cwd: rig.cwd },
      ),
    );
    expect(localErr).toContain(`No conversation found with session ID: ${unknown}`);
    expect(remoteErr).toContain(`No conversation found with session ID: ${unknown}`);
    expect(local.error).toContain('No conversation found');
    expect(remote.error).toBe(local.error);
  }, 60_000);
});

async function runQuery(options: NonNullable<Parameters<typeof query>[0]['options']>): Promise<{ messages: SDKMessage[]; error: string }> {
  const messages: SDKMessage[] = [];
  let error = '';
  const drive = async () => {
    try {
      for await (const m of query({ prompt: 'hi', options })) messages.push(m);
    } catch (err) {
      error = (err as Error).message;
    }
  };
  await withTimeout(drive(), 30_000, 'the query to end');
  return { messages, error };
}
