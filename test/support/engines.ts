/**
 * The two engines end-to-end tests run against: the real Claude Code CLI driven by the
 * scripted fake Messages API, and the built-in demo engine. Each case states, per engine,
 * how to make the model ask for Bash to write a file.
 */
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './fake-anthropic.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './claude-cli.js';
import type { GatewayClient } from '../../client/gateway-client.js';
import type { RemoteSession, SessionItem } from '../../client/remote-session.js';
import type { Cleanups } from './cleanups.js';
import { until } from './items.js';
import { startStack, type Stack, type StackOptions } from './stack.js';

export interface EngineRig {
  kind: 'claude' | 'demo';
  stack: Stack;
  /** The working folder of the agent's sessions. */
  cwd: string;
  /** Only for claude: the fake model. */
  fake?: FakeAnthropic;
  /** Only for claude: the engines' HOME. */
  home?: string;
  stop(): Promise<void>;
}

/** Scripts for the file-writing turn. */
export const WRITE_FILE: Record<'claude' | 'demo', { prompt: string; file: string; scenario?: FakeScenario }> = {
  claude: {
    prompt: 'Create made.txt',
    file: 'made.txt',
    scenario: {
      responses: [
        {
          text: 'Let me run it.',
          tool_use: { id: 'toolu_01', name: 'Bash', input: { command: 'echo hi > made.txt', description: 'write file' } },
        },
        { text: 'Done.' },
      ],
    },
  },
  demo: { prompt: 'create a file', file: 'tether-demo.txt' },
};

/** Starts gateway + agent for one engine kind, with a fresh cwd (and HOME + fake model for claude). */
export async function startRig(
  kind: 'claude' | 'demo',
  scenario: FakeScenario = { responses: [] },
  extra: Partial<StackOptions> = {},
  /** Added to the claude engine's environment (e.g. IS_SANDBOX=1 for bypassPermissions as root). */
  engineEnvExtra?: Record<string, string>,
): Promise<EngineRig> {
  const dirs: TempDir[] = [makeTempDir('tether-cwd-')];
  const cwd = dirs[0].path;
  let fake: FakeAnthropic | undefined;
  let home: TempDir | undefined;
  let stack: Stack;
  if (kind === 'claude') {
    fake = await startFakeAnthropic(scenario);
    home = makeTempDir('tether-home-');
    dirs.push(home);
    stack = await startStack({
      engine: 'claude',
      engineCommand: claudeBinaryPath(),
      engineEnv: claudeTestEnv({ home: home.path, baseUrl: fake.url, extra: engineEnvExtra }),
      cwd,
      ...extra,
    });
  } else {
    stack = await startStack({ engine: 'demo', cwd, ...extra });
  }
  return {
    kind,
    stack,
    cwd,
    fake,
    home: home?.path,
    async stop() {
      await stack.stop();
      await fake?.close();
      for (const d of dirs) d.cleanup();
    },
  };
}

/**
 * A demo rig owned by `cleanups`, one session on it, and `prompt` sent: resolves once the
 * session produced an item `reached` accepts, with that item and the iterator to go on with.
 */
export async function demoSessionAt(
  cleanups: Cleanups,
  prompt: string,
  reached: (item: SessionItem) => boolean,
): Promise<{ rig: EngineRig; client: GatewayClient; session: RemoteSession; it: AsyncIterator<SessionItem>; item: SessionItem }> {
  const rig = cleanups.own(await startRig('demo'));
  const client = await rig.stack.client();
  const session = await client.createSession({ agent: 'test-agent' });
  const it = session[Symbol.asyncIterator]();
  await session.sendUserMessage(prompt);
  return { rig, client, session, it, item: await until(it, reached) };
}
