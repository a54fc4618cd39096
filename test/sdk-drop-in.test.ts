import { query, type Options, type PermissionResult, type SDKMessage, type SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sessionOptionsFromArgs } from '../client/session-options-from-argv.js';
import { remoteSpawn } from '../client/remote-spawn.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './support/fake-anthropic.js';
import { localAndRemote } from './support/local-and-remote.js';
import { TETHER_CLAUDE } from './support/side-by-side.js';
import { withTimeout } from './support/stack.js';
import { waitFor } from './support/wait.js';

/**
 * The official Agent SDK's query() against a remote engine through both drop-in routes
 * (tether-claude as pathToClaudeCodeExecutable, remoteSpawn as spawnClaudeCodeProcess),
 * with the real CLI and the scripted model on the agent. The same conversation also runs
 * against a local CLI; the app must see the same message types in the same order.
 */

const LONG_STORY = Array.from({ length: 80 }, (_, i) => `word${i + 1}`).join(' ');

/** Five turns: plain, allowed Bash, denied Bash, interrupted mid-stream, plain again. */
const PROMPTS = ['Say hello', 'Create made.txt', 'Create denied.txt', 'Tell me a long story', 'Are you still there?'];
const INTERRUPTED_TURN = 3;
/** Streaming model calls made before the interrupted turn's own call (1 + 2 + 2). */
const CALLS_BEFORE_INTERRUPTED_TURN = 5;

const SCENARIO: FakeScenario = {
  responses: [
    { text: 'Hello from the scripted model.' },
    {
      text: 'Writing it.',
      tool_use: { id: 'toolu_allow', name: 'Bash', input: { command: 'echo hi > made.txt', description: 'write made.txt' } },
    },
    { text: 'Done.' },
    {
      text: 'Trying.',
      tool_use: { id: 'toolu_deny', name: 'Bash', input: { command: 'echo no > denied.txt', description: 'write denied.txt' } },
    },
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
    return String(input.command).includes('made.txt')
      ? { behavior: 'allow', updatedInput: input }
      : { behavior: 'deny', message: DENY_MESSAGE };
  };
  const q = query({ prompt: prompts(), options: { ...options, canUseTool } });
  let interrupting: Promise<void> | undefined;
  const drive = async () => {
    for await (const m of q) {
      run.messages.push(m);
      if (m.type === 'system' && m.subtype === 'init' && results === INTERRUPTED_TURN) {
        // Interrupt once the model call for this turn is streaming (a few words in).
        interrupting = (async () => {
          await waitFor(() => fake.modelRequests().length > CALLS_BEFORE_INTERRUPTED_TURN, 15_000, 'the long answer to start');
          const before = fake.textDeltasSent();
          await waitFor(() => fake.textDeltasSent() >= before + 5, 15_000, 'a few words of the long answer');
          await withTimeout(q.interrupt(), 10_000, 'the interrupt reply');
          run.interruptAnswered = true;
        })();
        interrupting.catch(() => {}); // awaited (and thrown) after the conversation
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

/** The app's view of a conversation: (type, subtype) pairs, with the content block types of assistant and user messages. */
const shape = (messages: SDKMessage[]) =>
  messages.map((m) => {
    const content = m.type === 'assistant' || m.type === 'user' ? m.message.content : undefined;
    const blocks = Array.isArray(content) ? `[${content.map((b) => b.type).join(',')}]` : '';
    return `${m.type}${'subtype' in m && m.subtype ? '/' + String(m.subtype) : ''}${blocks}`;
  });

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
  // The interrupt came mid-stream: the app got the partial text, then the turn ended.
  const texts = run.messages.flatMap((m) =>
    m.type === 'assistant' ? m.message.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])) : [],
  );
  const partial = texts.find((t) => t.startsWith('word1 '));
  expect(partial && partial.length < LONG_STORY.length && LONG_STORY.startsWith(partial)).toBe(true);
  expect(r[4].subtype === 'success' && r[4].result).toBe('Still here.');
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
    local.run = await converse(
      { pathToClaudeCodeExecutable: claudeBinaryPath(), cwd: dirs[0].path, env: claudeTestEnv({ home: dirs[1].path, baseUrl: fake.url }) },
      fake,
    );
    // A precondition, not a test of its own: the drop-ins are compared with a reference that
    // itself ran the whole conversation.
    expectConversation(local.run, dirs[0].path, fake);
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

  it('pathToClaudeCodeExecutable = tether-claude (gateway over WebSocket): same messages as local', async () => {
    rig = await startRig('claude', SCENARIO);
    const env = {
      ...process.env,
      TETHER_GATEWAY: rig.stack.url,
      TETHER_AGENT: 'test-agent',
      TETHER_CWD: rig.cwd,
      TETHER_TOKEN: rig.stack.token ?? '',
    };
    const run = await converse({ pathToClaudeCodeExecutable: TETHER_CLAUDE, env, stderr: (t) => void stderr.push(t) }, rig.fake!);
    expectConversation(run, rig.cwd, rig.fake!);
    expect(shape(run.messages), `stderr: ${stderr.join('')}`).toEqual(shape(local!.run.messages));
  }, 90_000);

  it('spawnClaudeCodeProcess = remoteSpawn(...) (gateway over gRPC): same messages as local', async () => {
    rig = await startRig('claude', SCENARIO, { clientTransport: 'grpc' });
    const spawn = remoteSpawn({
      gateway: rig.stack.url,
      token: rig.stack.token,
      agent: 'test-agent',
      cwd: rig.cwd,
      stderr: (t) => void stderr.push(t),
    });
    const run = await converse({ spawnClaudeCodeProcess: spawn }, rig.fake!);
    expectConversation(run, rig.cwd, rig.fake!);
    expect(shape(run.messages), `stderr: ${stderr.join('')}`).toEqual(shape(local!.run.messages));
  }, 90_000);
});

describe('an app without canUseTool', () => {
  const start = localAndRemote();

  it('has approvals denied as by a local CLI with no prompt tool (same messages, same tools offered)', async () => {
    const scenario: FakeScenario = { responses: [SCENARIO.responses[1], SCENARIO.responses[2]] };
    const collect = async (options: Options) => {
      const out: SDKMessage[] = [];
      for await (const m of query({ prompt: 'Create made.txt', options })) out.push(m);
      return out;
    };
    const { local, rig } = await start(scenario);
    const localRun = await withTimeout(collect(local), 30_000, 'the local run');
    const remoteRun = await withTimeout(
      collect({
        spawnClaudeCodeProcess: remoteSpawn({ gateway: rig.stack.url, token: rig.stack.token, agent: 'test-agent', cwd: rig.cwd }),
      }),
      30_000,
      'the remote run',
    );
    expect(shape(remoteRun)).toEqual(shape(localRun));
    expect(shape(remoteRun)).toContain('system/permission_denied');
    const tools = (run: SDKMessage[]) => (run[0] as Extract<SDKMessage, { type: 'system'; subtype: 'init' }>).tools;
    expect(tools(remoteRun)).toEqual(tools(localRun));
    expect(existsSync(join(rig.cwd, 'made.txt'))).toBe(false);
  }, 60_000);
});

describe('sessionOptionsFromArgs', () => {
  it('maps the flags with a session option, drops local-only ones and passes the rest', () => {
    const argv = [
      '--output-format',
      'stream-json',
      '--verbose',
      '--input-format',
      'stream-json',
      '--model=claude-x',
      '--permission-prompt-tool=stdio',
      '--allowedTools=Read,Bash(git log:*)',
      '--disallowedTools=Write',
      '--permission-mode=default',
      '--include-partial-messages',
      '--debug-file=/tmp/sdk-debug.log',
      '--debug',
      '--setting-sources=',
      '--mcp-config',
      '{"mcpServers":{}}',
      '--max-turns=3',
      '--system-prompt',
      '',
      '--resume',
      'abc',
    ];
    expect(sessionOptionsFromArgs(argv, '/remote/dir')).toEqual({
      model: 'claude-x',
      allowed_tools: ['Read', 'Bash(git log:*)'],
      disallowed_tools: ['Write'],
      permission_mode: 'default',
      include_partial_messages: true,
      system_prompt: '',
      resume: 'abc',
      cwd: '/remote/dir',
      extra_args: ['--setting-sources=', '--mcp-config', '{"mcpServers":{}}', '--max-turns=3'],
    });
  });

  it('keeps a value its option would refuse raw (the agent judges it) and denies approvals without a prompt tool', () => {
    expect(sessionOptionsFromArgs(['--permission-mode', 'sideways', '--settings={}'])).toEqual({
      extra_args: ['--permission-mode', 'sideways', '--settings={}', '--permission-prompts', 'none'],
    });
  });
});

interface BinResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs tether-claude with `input` on stdin (kept open when `keepOpen`), bounded. */
function runBin(
  args: string[],
  env: Record<string, string | undefined>,
  input: string,
  opts: { keepOpen?: boolean; signalAfter?: (stdout: string) => boolean } = {},
): Promise<BinResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [TETHER_CLAUDE, ...args], {
      env: { PATH: process.env.PATH, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let signalled = false;
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!signalled && opts.signalAfter?.(stdout)) {
        signalled = true;
        child.kill('SIGTERM');
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`tether-claude did not exit within 20 s\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, 20_000);
    child.on('close', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
    child.stdin.on('error', () => {});
    child.stdin.write(input);
    if (!opts.keepOpen) child.stdin.end();
  });
}

const userLine = (text: string) =>
  JSON.stringify({ type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '' }) + '\n';
const STREAM_ARGS = ['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json'];

describe('tether-claude as a process', () => {
  let rig: EngineRig | undefined;
  afterEach(async () => {
    await rig?.stop();
    rig = undefined;
  });
  const envFor = (r: EngineRig) => ({
    TETHER_GATEWAY: r.stack.url,
    TETHER_AGENT: 'test-agent',
    TETHER_TOKEN: r.stack.token,
    TETHER_CWD: r.cwd,
  });
  const sessionStates = async (r: EngineRig) => (await (await r.stack.client()).listSessions()).map((x) => x.state);

  it('--help alone prints usage; missing env or an unreachable gateway fail clearly with exit 1', async () => {
    const help = await runBin(['--help'], {}, '');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('TETHER_GATEWAY');
    const missing = await runBin(STREAM_ARGS, {}, '');
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toContain('missing TETHER_GATEWAY and TETHER_AGENT');
    const unreachable = await runBin(STREAM_ARGS, { TETHER_GATEWAY: 'ws://127.0.0.1:9', TETHER_AGENT: 'x' }, '');
    expect(unreachable).toMatchObject({ code: 1, stdout: '' });
    expect(unreachable.stderr).toMatch(/tether-claude: .*127\.0\.0\.1:9/);
  });

  it("stdout carries only engine frames; stdin EOF ends the session with the engine's exit code", async () => {
    rig = await startRig('demo');
    const r = await runBin(STREAM_ARGS, envFor(rig), userLine('hello'));
    expect(r.code, r.stderr).toBe(0);
    const frames = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string });
    expect(frames.map((f) => f.type)).toContain('result');
    expect(frames.some((f) => f.type === 'tether')).toBe(false);
    expect(await sessionStates(rig)).toEqual(['ended']);
  });

  it("a line that is not JSON ends it with exit 1 and the CLI's message, and stops the session", async () => {
    rig = await startRig('demo');
    const r = await runBin(STREAM_ARGS, envFor(rig), 'this is not json\n', { keepOpen: true });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Error parsing streaming input line');
    expect(await sessionStates(rig)).toEqual(['ended']);
  });

  it('an argument the agent refuses fails with exit 1 and names it', async () => {
    rig = await startRig('demo');
    const r = await runBin([...STREAM_ARGS, '--settings', '{"hooks":{}}'], envFor(rig), '');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('"--settings" is not allowed');
  });

  it('SIGTERM reaches the remote engine at once, and tether-claude exits with its code (143, as a local CLI does)', async () => {
    rig = await startRig('demo');
    const r = await runBin(STREAM_ARGS, envFor(rig), userLine('hello'), {
      keepOpen: true,
      signalAfter: (out) => out.includes('"type":"result"'),
    });
    expect(r.code, r.stderr).toBe(143);
    expect(await sessionStates(rig)).toEqual(['ended']);
  });
});
