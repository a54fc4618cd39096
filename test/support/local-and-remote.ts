/**
 * One scripted conversation, run by a local CLI (the reference: the SDK spawns the real CLI)
 * and by a remote agent through Tether, each with its own fake Messages API on the same
 * script. Teardown is registered with afterEach, so a test only says what it compares.
 */
import type { Options } from '@anthropic-ai/claude-agent-sdk';
import { afterEach } from 'vitest';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './claude-cli.js';
import { startRig, type EngineRig } from './engines.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './fake-anthropic.js';

/** What a test gets: the SDK options of the local reference run, and the remote rig. */
export interface LocalAndRemote {
  /** Options for query() that spawn the real CLI locally, in a folder and HOME of its own. */
  local: Options & { cwd: string };
  /** A gateway and an agent running the real CLI against the same script. */
  rig: EngineRig;
}

/** Call in a describe block: returns `start(scenario)`, whose rig and folders go after each test. */
export function localAndRemote(): (scenario: FakeScenario) => Promise<LocalAndRemote> {
  let rig: EngineRig | undefined;
  let fake: FakeAnthropic | undefined;
  const dirs: TempDir[] = [];
  afterEach(async () => {
    await rig?.stop();
    await fake?.close();
    for (const d of dirs.splice(0)) d.cleanup();
    rig = fake = undefined;
  });
  return async (scenario) => {
    fake = await startFakeAnthropic(scenario);
    const [cwd, home] = [makeTempDir('tether-local-cwd-'), makeTempDir('tether-local-home-')];
    dirs.push(cwd, home);
    rig = await startRig('claude', scenario);
    return {
      local: { pathToClaudeCodeExecutable: claudeBinaryPath(), cwd: cwd.path, env: claudeTestEnv({ home: home.path, baseUrl: fake.url }) },
      rig,
    };
  };
}
