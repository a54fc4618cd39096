/**
 * The real ACP agents the ACP engine tests run (installed as devDependencies), offline: each
 * talks only to scripted Messages APIs on 127.0.0.1 (fake-anthropic.ts), with a fresh HOME and
 * XDG folders. OpenCode gets a local models file (no models.dev fetch), no auto-update, no
 * default plugins, no LSP downloads, and its title model on a second fake so titles never take
 * the script's answers. Claude Code's adapter runs the SDK's own CLI with the env our Claude tests use.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import type { AgentOptions } from '../../agent/agent.js';
import { join, resolve } from 'node:path';
import { claudeTestEnv, makeTempDir, type TempDir } from './claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './fake-anthropic.js';
import { startStack, type Stack, type StackOptions } from './stack.js';
import { hasTool, toolPath } from './tools.js';

/** The real ACP agents this machine has: Claude Code's adapter always (a devDependency), OpenCode where its binary is installed. */
export const ACP_AGENTS: AcpAgentName[] = hasTool('opencode') ? ['claude-acp', 'opencode'] : ['claude-acp'];

export type AcpAgentName = 'opencode' | 'claude-acp';

/** node_modules/.bin, where the devDependencies put `claude-code-acp` (OpenCode's binary is a tool of its own: tools.ts). */
export const BIN_DIR = resolve('node_modules/.bin');

/** OpenCode's model as the tests configure it. */
export const OPENCODE_MODEL = 'anthropic/claude-test';

function modelsFile(home: string, mainUrl: string, titleUrl: string): string {
  const model = (id: string) => ({
    id,
    name: id,
    tool_call: true,
    reasoning: false,
    attachment: false,
    temperature: true,
    limit: { context: 200_000, output: 8192 },
    cost: { input: 0, output: 0 },
  });
  const provider = (id: string, url: string, modelId: string) => ({
    id,
    name: id,
    env: ['ANTHROPIC_API_KEY'],
    npm: '@ai-sdk/anthropic',
    api: `${url}/v1`,
    models: { [modelId]: model(modelId) },
  });
  const path = join(home, 'models.json');
  writeFileSync(
    path,
    JSON.stringify({ anthropic: provider('anthropic', mainUrl, 'claude-test'), titles: provider('titles', titleUrl, 'claude-title') }),
  );
  return path;
}

/** OpenCode's environment: offline, edits and commands asked through ACP. */
export function opencodeEnv(home: string, mainUrl: string, titleUrl: string): Record<string, string> {
  const xdg = (p: string) => {
    const d = join(home, p);
    mkdirSync(d, { recursive: true });
    return d;
  };
  const config = {
    model: OPENCODE_MODEL,
    small_model: 'titles/claude-title',
    autoupdate: false,
    share: 'disabled',
    provider: {
      anthropic: { options: { baseURL: `${mainUrl}/v1`, apiKey: 'sk-test' } },
      titles: { options: { baseURL: `${titleUrl}/v1`, apiKey: 'sk-test' } },
    },
    permission: { edit: 'ask', bash: 'ask' },
  };
  return {
    PATH: `${BIN_DIR}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: home,
    XDG_CONFIG_HOME: xdg('.config'),
    XDG_DATA_HOME: xdg('.local/share'),
    XDG_CACHE_HOME: xdg('.cache'),
    XDG_STATE_HOME: xdg('.local/state'),
    ANTHROPIC_API_KEY: 'sk-test',
    OPENCODE_MODELS_PATH: modelsFile(home, mainUrl, titleUrl),
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_SHARE: '1',
    OPENCODE_DISABLE_CLAUDE_CODE: '1',
    OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
  };
}

/** What an agent needs to run one of the ACP agents. */
export interface AcpEngineOptions {
  engine: NonNullable<AgentOptions['engine']>;
  engineCommand?: string;
  engineEnv: NodeJS.ProcessEnv;
}

export interface AcpRig {
  name: AcpAgentName;
  stack: Stack;
  /** The agent's engine options, for another agent of the same engine (e.g. one behind a proxy). */
  engine: AcpEngineOptions;
  cwd: string;
  fake: FakeAnthropic;
  stop(): Promise<void>;
}

/**
 * Gateway + agent whose engine is a real ACP agent: OpenCode as `--engine acp
 * --engine-command "<bin>/opencode acp"`, Claude Code's adapter as the `claude-acp` preset
 * (found on the engine's PATH... and the agent's: the preset's program is looked up on PATH).
 */
export async function startAcpRig(name: AcpAgentName, scenario: FakeScenario, extra: Partial<StackOptions> = {}): Promise<AcpRig> {
  const dirs: TempDir[] = [makeTempDir('tether-acp-cwd-'), makeTempDir('tether-acp-home-')];
  const [cwd, home] = dirs.map((d) => d.path);
  const fake = await startFakeAnthropic(scenario);
  const titles = await startFakeAnthropic({ responses: [], fallback: { text: 'A title' } });
  // claude-acp: the adapter starts the CLI able to bypass permissions, which the CLI refuses as root unless sandboxed.
  const engine: AcpEngineOptions =
    name === 'opencode'
      ? { engine: ['acp'], engineCommand: `${toolPath('opencode')} acp`, engineEnv: opencodeEnv(home!, fake.url, titles.url) }
      : {
          engine: ['claude-acp'],
          engineEnv: {
            ...claudeTestEnv({ home: home!, baseUrl: fake.url, extra: { IS_SANDBOX: '1' } }),
            PATH: `${BIN_DIR}:${process.env.PATH}`,
          },
        };
  const stack = await startStack({ ...engine, cwd: cwd!, ...extra });
  return {
    name,
    stack,
    engine,
    cwd: cwd!,
    fake,
    async stop() {
      await stack.stop();
      await fake.close();
      await titles.close();
      for (const d of dirs) d.cleanup();
    },
  };
}
