import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asTetherError, type TetherError } from '../core/errors.js';
import type { SessionOptions } from '../core/protocol/session-options.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { readTurn } from './support/turns.js';

/**
 * Issue 13, finding 1, through a real gateway and agent with the real CLI, on WebSocket and
 * on gRPC: a client with nothing but a `create`-scoped token tries to make the engine run a
 * program, write a file where it chooses, skip every prompt or reach the whole disk.
 */
describe.each(['ws', 'grpc'] as const)('engine options from a create-only client, over %s', (transport) => {
  let rig: EngineRig;
  let tmp: TempDir;
  beforeAll(async () => {
    rig = await startRig('claude', { responses: [] }, { clientTransport: transport, agentTransport: transport });
    tmp = makeTempDir('tether-trust-');
  });
  afterAll(async () => {
    await rig?.stop();
    tmp?.cleanup();
  });

  /** session.create from a create-only token; the error it got, or undefined when a session started. */
  async function create(options: SessionOptions): Promise<TetherError | undefined> {
    const client = await rig.stack.client({ sub: 'mallory', scopes: ['create'] });
    try {
      await client.createSession({ agent: 'test-agent', options });
      return undefined;
    } catch (err) {
      return asTetherError(err);
    } finally {
      await client.close();
    }
  }

  /** Every session the gateway lists (a refused create must leave none, not even an ended one). */
  async function liveSessions(): Promise<string[]> {
    const admin = await rig.stack.client();
    try {
      return (await admin.listSessions()).map((s) => `${s.id} ${s.state}`);
    } finally {
      await admin.close();
    }
  }

  it('an --mcp-config whose server is a command is refused, and the program never runs', async () => {
    const marker = join(tmp.path, `pwned-${transport}`);
    const config = JSON.stringify({ mcpServers: { x: { command: 'sh', args: ['-c', `id > ${marker}`] } } });
    const err = await create({ extra_args: ['--mcp-config', config] });
    expect(err?.code).toBe('PERMISSION_DENIED');
    expect(err?.message).toContain('"--mcp-config"');
    expect(existsSync(marker)).toBe(false);
    expect(await liveSessions()).toEqual([]);
  });

  it('resume = "--debug-file=PATH" reaches the CLI as the value of --resume: no debug file', async () => {
    const debugFile = join(tmp.path, `debug-${transport}.log`);
    const err = await create({ resume: `--debug-file=${debugFile}` });
    // The CLI ran and read the whole string as the session to resume (and found none).
    expect(err?.code).toBe('FAILED_PRECONDITION');
    expect(err?.message).toContain(`Provided value "--debug-file=${debugFile}"`);
    expect(existsSync(debugFile)).toBe(false);
    expect(await liveSessions()).toEqual([]);
  });

  it.each([
    ['--permission-mode', 'bypassPermissions'],
    ['--add-dir', '/'],
    ['--dangerously-skip-permissions'],
    ['--settings', '{"hooks":{}}'],
  ])('extra_args %s … are refused with PERMISSION_DENIED naming the flag', async (...args: string[]) => {
    const err = await create({ extra_args: args });
    expect(err?.code).toBe('PERMISSION_DENIED');
    expect(err?.message).toContain(`"${args[0]}"`);
    expect(await liveSessions()).toEqual([]);
  });

  it('every option still reaches the real CLI as the value of its own flag (--flag=value)', async () => {
    const client = await rig.stack.client();
    const session = await client.createSession({
      agent: 'test-agent',
      options: {
        model: 'claude-tether-test',
        permission_mode: 'acceptEdits',
        allowed_tools: ['Bash(echo *)'],
        disallowed_tools: ['WebFetch'],
        system_prompt: '-a prompt that starts with a dash',
        append_system_prompt: '--debug-file=/tmp/not-a-flag',
        include_partial_messages: true,
      },
    });
    rig.fake!.setScenario({
      responses: [
        {
          text: 'Running.',
          tool_use: { id: `toolu_echo_${transport}`, name: 'Bash', input: { command: 'echo allowed-by-rule', description: 'echo' } },
        },
        { text: 'Done.' },
      ],
    });
    await session.sendUserMessage('hello');
    const turn = await readTurn(session, () => ({ behavior: 'deny', message: 'the allow rule should have answered' }));
    expect(turn.prompts).toEqual([]); // --allowedTools=Bash(echo *) approved it
    expect(rig.fake!.lastToolResults().find((r) => r.tool_use_id === `toolu_echo_${transport}`)?.content).toContain('allowed-by-rule');
    expect(existsSync('/tmp/not-a-flag')).toBe(false);
    const init = turn.messages.find((m) => m.type === 'system' && m.subtype === 'init') as {
      model?: string;
      permissionMode?: string;
      tools?: string[];
    };
    expect(init).toMatchObject({ model: 'claude-tether-test', permissionMode: 'acceptEdits' });
    expect(init.tools).not.toContain('WebFetch');
    expect(init.tools).toContain('Bash');
    expect(turn.messages.some((m) => m.type === 'stream_event')).toBe(true);
    expect(rig.fake!.modelRequests().at(-1)?.model).toBe('claude-tether-test');
    await session.stop();
  });

  it("permission_mode bypassPermissions is the agent owner's choice too", async () => {
    const err = await create({ permission_mode: 'bypassPermissions' });
    expect(err?.code).toBe('PERMISSION_DENIED');
    expect(err?.message).toContain('--allow-bypass-permissions');
  });
});

describe("--session-root: where sessions may work is the owner's choice", () => {
  let rig: EngineRig;
  let outside: TempDir;
  beforeAll(async () => {
    outside = makeTempDir('tether-outside-');
  });
  afterAll(async () => {
    await rig?.stop();
    outside?.cleanup();
  });

  it('refuses a folder outside the roots, also through a symlink, and allows the roots and below', async () => {
    const roots = makeTempDir('tether-roots-');
    try {
      mkdirSync(join(roots.path, 'repo'));
      symlinkSync(outside.path, join(roots.path, 'escape'));
      rig = await startRig('demo', undefined, { agentOptions: { sessionRoots: [roots.path] } });
      const client = await rig.stack.client();
      for (const cwd of [outside.path, '/', join(roots.path, 'escape')]) {
        const err = await client.createSession({ agent: 'test-agent', options: { cwd } }).then(
          () => undefined,
          (e: unknown) => asTetherError(e),
        );
        expect(err?.code, cwd).toBe('PERMISSION_DENIED');
        expect(err?.message).toContain('--session-root');
      }
      const ok = await client.createSession({ agent: 'test-agent', options: { cwd: join(roots.path, 'repo') } });
      await ok.stop();
    } finally {
      roots.cleanup();
    }
  });
});
