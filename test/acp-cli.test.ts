import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN_DIR } from './support/acp-agents.js';
import { claudeTestEnv } from './support/claude-cli.js';
import { GatewayClient } from '../client/gateway-client.js';
import { asPermissionRequest } from '../client/permission-policy.js';
import { killProcessesIn, runTether, startTether } from './support/cli.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { isCanUseTool, until } from './support/items.js';
import { waitFor } from './support/wait.js';

/**
 * An agent that offers two engines (`tether up --engine demo --engine claude-acp`): `tether
 * agents` lists both, `--engine` on `tether chat` and `tether run` picks Claude Code's ACP
 * adapter (the real one, over the real CLI and the scripted Messages API), and the terminal
 * shows its turn: the tool call, the prompt answered, the file written, the answer's text.
 */
describe('tether chat/run --engine with an ACP engine', () => {
  const cleanups = cleanupsPerTest();
  let fake: FakeAnthropic;
  beforeAll(async () => {
    fake = await startFakeAnthropic({ responses: [] });
  });
  afterAll(() => fake.close());

  async function up(): Promise<{ env: Record<string, string>; cwd: string }> {
    const dir = cleanups.tempDir('tether-acp-cli-');
    const home = cleanups.tempDir('tether-acp-home-').path;
    const engineEnv = { ...claudeTestEnv({ home, baseUrl: fake.url, extra: { IS_SANDBOX: '1' } }), PATH: `${BIN_DIR}:${process.env.PATH}` };
    const daemon = startTether(
      ['up', '--port', '0', '--engine', 'demo', '--engine', 'claude-acp', '--cwd', dir.path, '--state-dir', join(dir.path, 'state')],
      {
        env: engineEnv,
      },
    );
    cleanups.push(async () => {
      await daemon.stop('SIGTERM', 15_000); // tether up stops its engines
      killProcessesIn(dir.path, 'claude'); // any a SIGKILL after the bound left behind
    });
    return {
      cwd: dir.path,
      env: {
        TETHER_GATEWAY: (await daemon.line('gateway: ', 60_000)).slice('gateway: '.length),
        TETHER_TOKEN: (await daemon.line('token: ')).slice('token: '.length),
        TETHER_AGENT: 'local',
      },
    };
  }

  it('tether agents lists the engines; run --engine claude-acp shows the turn; an unknown engine is refused', async () => {
    const { env, cwd } = await up();
    const agents = JSON.parse((await runTether(['agents', '--json'], { env })).stdout) as Array<{
      engines: string[];
      default_engine: string;
    }>;
    expect(agents[0]).toMatchObject({ engines: ['demo', 'claude-acp'], default_engine: 'demo' });
    expect((await runTether(['agents'], { env })).stdout).toContain('demo,claude-acp');

    const file = join(cwd, 'made.txt');
    fake.setScenario({
      responses: [
        { text: 'Writing it.', tool_use: { name: 'mcp__acp__Write', input: { file_path: file, content: 'via run\n' } } },
        { text: 'Done writing.' },
      ],
    });
    const run = await runTether(['run', '--engine', 'claude-acp', '--allow', 'Edit', 'write made.txt'], { env, timeoutMs: 120_000 });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('Done writing.');
    expect(run.stderr).toContain('Edit');
    expect(readFileSync(file, 'utf8')).toBe('via run\n');

    const bogus = await runTether(['run', '--engine', 'gpt', 'hi'], { env });
    expect(bogus.code).not.toBe(0);
    expect(bogus.stderr).toContain('--engine must be one of claude, demo, acp, opencode, gemini, codex, claude-acp; got "gpt"');
    const absent = await runTether(['run', '--engine', 'opencode', 'hi'], { env });
    expect(absent.code).not.toBe(0);
    expect(absent.stderr).toContain('cannot run engine "opencode"');
  }, 240_000);

  it('tether chat --engine claude-acp shows the turn: the tool call, the prompt (answered by a teammate), the answer', async () => {
    const { env, cwd } = await up();
    const file = join(cwd, 'chat.txt');
    fake.setScenario({
      responses: [
        { text: 'Writing it.', tool_use: { name: 'mcp__acp__Write', input: { file_path: file, content: 'via chat\n' } } },
        { text: 'Chat done.' },
      ],
    });
    const chat = runTether(['chat', '--engine', 'claude-acp'], { env, input: 'write chat.txt\n', timeoutMs: 150_000 });
    // A teammate attaches and answers the prompt the terminal shows.
    const mate = await GatewayClient.connect({ gateway: env.TETHER_GATEWAY, token: env.TETHER_TOKEN, reconnect: false });
    cleanups.push(() => mate.close());
    let id: string | undefined;
    await waitFor(async () => (id = (await mate.listSessions())[0]?.id) !== undefined, 60_000, 'the chat session');
    const s = await mate.attach(id!);
    const prompt = await until(s[Symbol.asyncIterator](), isCanUseTool, [], 120_000, 'the permission prompt');
    const ask = asPermissionRequest((prompt as { message: Record<string, unknown> }).message)!;
    await s.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    const out = await chat;
    expect(out.stdout).toContain(`Allow Edit: ${file}?`);
    expect(out.stdout).toContain('Writing it.');
    expect(out.stdout).toContain('Chat done.');
    expect(readFileSync(file, 'utf8')).toBe('via chat\n');
  }, 240_000);
});
