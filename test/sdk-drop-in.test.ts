import { query, type Options, type PermissionResult, type SDKMessage, type SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { remoteSpawn } from '../client/remote-spawn.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './support/fake-anthropic.js';
import { withTimeout } from './support/stack.js';

/**
 * The official Agent SDK's query() against a remote engine through both drop-in routes
 * (tether-claude as pathToClaudeCodeExecutable, remoteSpawn as spawnClaudeCodeProcess),
 * with the real CLI and the scripted model on the agent. The same conversation also runs
 * against a local CLI; the app must see the same message types in the same order.
 */
const TETHER_CLAUDE = fileURLToPath(new URL('../dist/bin/tether-claude.js', import.meta.url));

const LONG_STORY = Array.from({ length: 80 }, (_, i) => `word${i + 1}`).join(' ');

/** Five turns: plain, allowed Bash, denied Bash, interrupted mid-stream, plain again. */
const PROMPTS = ['Say hello', 'Create made.txt', 'Create denied.txt', 'Tell me a long story', 'Are you still there?'];
const INTERRUPTED_TURN = 3;
/** Streaming model calls made before the interrupted turn's own call (1 + 2 + 2). */
const CALLS_BEFORE_INTERRUPTED_TURN = 5;

const SCENARIO: FakeScenario = {
  responses: [
    { text: 'Hello from the scripted model.' },
    { text: 'Writing it.', tool_use: { id: 'toolu_allow', name: 'Bash', input: { command: 'echo hi > made.txt', description: 'write made.txt' } } },
    { text: 'Done.' },
    { text: 'Trying.', tool_use: { id: 'toolu_deny', name: 'Bash', input: { command: 'echo no > denied.txt', description: 'write denied.txt' } } },
    { text: 'Understood, I will not write it.' },
    { text: LONG_STORY, chunk_delay_ms: 100 },
    { text: 'Still here.' },
  ],
};

const DENY_MESSAGE = 'Denied by the SDK app';

interface Run {
  messages: SDKMessage[];
  asked: { tool: string; command: unknown }[];
  interruptAnswered: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Drives one query() through the five turns in streaming input mode: the next prompt goes
 * out once the app has seen the previous turn's result. canUseTool allows made.txt and
 * denies everything else; turn 4 is interrupted once the model has streamed for a moment.
 */
async function converse(options: Options, fake: FakeAnthropic): Promise<Run> {
  const run: Run = { messages: [], asked: [], interruptAnswered: false };
  let results = 0;
  let wake: (() => void) | undefined;
  const turnEnded = () => new Promise<void>((resolve) => (wake = resolve));
  async function* prompts(): AsyncGenerator<SDKUserMessage> {
    for (const [i, text] of PROMPTS.entries()) {
      yield { type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '' };
      while (results <= i) await turnEnded();
    }
  }
  const canUseTool = async (tool: string, input: Record<string, unknown>): Promise<PermissionResult> => {
    run.asked.push({ tool, command: input.command });
    return String(input.command).includes('made.txt') ? { behavior: 'allow', updatedInput: input } : { behavior: 'deny', message: DENY_MESSAGE };
  };
  const q = query({ prompt: prompts(), options: { ...options, canUseTool } });
  let interrupting: Promise<void> | undefined;
  const drive = async () => {
    for await (const m of q) {
      run.messages.push(m);
      if (m.type === 'system' && m.subtype === 'init' && results === INTERRUPTED_TURN) {
        // Interrupt once the model call for this turn is streaming (a few words in).
        interrupting = (async () => {
          await withTimeout(until(() => fake.modelRequests().length > CALLS_BEFORE_INTERRUPTED_TURN), 15_000, 'the long answer to start');
          await sleep(500);
          await withTimeout(q.interrupt(), 10_000, 'the interrupt reply');
          run.interruptAnswered = true;
        })();
      }
      if (m.type === 'result') {
        results++;
        wake?.();
      }
    }
  };
  try {
    await withTimeout(drive(), 75_000, 'the conversation to finish');
    await interrupting;
  } finally {
    q.close();
  }
  return run;
}

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await sleep(25);
}

/** The app's view of a conversation, as (type, subtype) pairs. */
const shape = (messages: SDKMessage[]) => messages.map((m) => `${m.type}${'subtype' in m && m.subtype ? '/' + String(m.subtype) : ''}`);

const results = (messages: SDKMessage[]) => messages.filter((m): m is Extract<SDKMessage, { type: 'result' }> => m.type === 'result');

/** What must hold for any run, local or remote. */
function expectConversation(run: Run, cwd: string, fake: FakeAnthropic): void {
  const r = results(run.messages);
  expect(r.map((m) => m.subtype)).toEqual(['success', 'success', 'success', 'error_during_execution', 'success']);
  expect(run.asked).toEqual([
    { tool: 'Bash', command: 'echo hi > made.txt' },
    { tool: 'Bash', command: 'echo no > denied.txt' },
  ]);
  expect(readFileSync(join(cwd, 'made.txt'), 'utf8').trim()).toBe('hi');
  expect(existsSync(join(cwd, 'denied.txt'))).toBe(false);
  const denied = fake.lastToolResults().find((t) => t.tool_use_id === 'toolu_deny');
  expect(denied?.is_error).toBe(true);
  expect(denied?.content).toContain(DENY_MESSAGE);
  expect(run.interruptAnswered).toBe(true);
  expect(r[4].result).toBe('Still here.');
}

describe('Agent SDK query() through the drop-ins', () => {
  let local: { run: Run; dirs: TempDir[]; fake: FakeAnthropic } | undefined;
  let rig: EngineRig | undefined;
  const stderr: string[] = [];

  beforeAll(async () => {
    // The reference: the same conversation with the SDK spawning the real CLI locally.
    const fake = await startFakeAnthropic(SCENARIO);
    const dirs = [makeTempDir('tether-local-cwd-'), makeTempDir('tether-local-home-')];
    local = { dirs, fake, run: { messages: [], asked: [], interruptAnswered: false } };
    local.run = await converse({ pathToClaudeCodeExecutable: claudeBinaryPath(), cwd: dirs[0].path, env: claudeTestEnv({ home: dirs[1].path, baseUrl: fake.url }) }, fake);
  }, 90_000);

  afterAll(async () => {
    await local?.fake.close();
    for (const d of local?.dirs ?? []) d.cleanup();
  });

  afterEach(async () => {
    await rig?.stop();
    rig = undefined;
    stderr.length = 0;
  });

  it('a local CLI (the reference) runs the conversation', () => {
    if (process.env.SHOW_SHAPE) console.log(JSON.stringify(shape(local!.run.messages)), JSON.stringify(local!.run.messages.filter((m) => m.type === "assistant" || m.type === "user").map((m) => JSON.stringify((m as any).message.content).slice(0, 150))));
    expectConversation(local!.run, local!.dirs[0].path, local!.fake);
  });

  it('pathToClaudeCodeExecutable = tether-claude (gateway over WebSocket): same messages as local', async () => {
    rig = await startRig('claude', SCENARIO);
    const env = { ...process.env, TETHER_GATEWAY: rig.stack.url, TETHER_AGENT: 'test-agent', TETHER_CWD: rig.cwd, TETHER_TOKEN: rig.stack.token ?? '' };
    const run = await converse({ pathToClaudeCodeExecutable: TETHER_CLAUDE, env, stderr: (t) => void stderr.push(t) }, rig.fake!);
    expectConversation(run, rig.cwd, rig.fake!);
    expect(shape(run.messages), `stderr: ${stderr.join('')}`).toEqual(shape(local!.run.messages));
  }, 90_000);

  it('spawnClaudeCodeProcess = remoteSpawn(...) (gateway over gRPC): same messages as local', async () => {
    rig = await startRig('claude', SCENARIO, { clientTransport: 'grpc' });
    const spawn = remoteSpawn({ gateway: rig.stack.url, token: rig.stack.token, agent: 'test-agent', cwd: rig.cwd, stderr: (t) => void stderr.push(t) });
    const run = await converse({ spawnClaudeCodeProcess: spawn }, rig.fake!);
    expectConversation(run, rig.cwd, rig.fake!);
    expect(shape(run.messages), `stderr: ${stderr.join('')}`).toEqual(shape(local!.run.messages));
  }, 90_000);
});
