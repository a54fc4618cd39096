// Tests for the demo engine (agent/demo-engine/), run as a real process over stdio.

import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { STREAM_JSON_FLAGS } from '../agent/engine-command.js';

type Frame = Record<string, any>;

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ENGINE = join(ROOT, 'dist/agent/demo-engine/main.js');
const MODULES = ['main', 'turns', 'frames', 'shell'];
const BASE_ARGS = STREAM_JSON_FLAGS; // what the agent starts every engine with
const WAIT_MS = 5_000;

const INIT = { type: 'control_request', request_id: 'init_1', request: { subtype: 'initialize', hooks: null } };
const prompt = (content: string, extra: Frame = {}): Frame => ({
  type: 'user',
  message: { role: 'user', content },
  parent_tool_use_id: null,
  session_id: 'default',
  ...extra,
});
const allow = (req: Frame, updatedInput: unknown): Frame => ({
  type: 'control_response',
  response: { subtype: 'success', request_id: req.request_id, response: { behavior: 'allow', updatedInput } },
});
const deny = (req: Frame, message: string): Frame => ({
  type: 'control_response',
  response: { subtype: 'success', request_id: req.request_id, response: { behavior: 'deny', message } },
});

class Engine {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly frames: Frame[] = [];
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private waiters: Array<() => void> = [];

  constructor(
    readonly cwd: string,
    args: string[] = [],
    env: Record<string, string> = {},
  ) {
    const baseEnv = { ...process.env };
    delete baseEnv.CLAUDE_CODE_SDK_READS_SESSION_STATE;
    this.proc = spawn(process.execPath, [ENGINE, ...BASE_ARGS, ...args], { cwd, env: { ...baseEnv, ...env } });
    createInterface({ input: this.proc.stdout }).on('line', (line) => {
      this.frames.push(JSON.parse(line) as Frame);
      for (const w of this.waiters) w();
    });
    this.proc.stderr.on('data', (d: Buffer) => {
      this.stderr += d.toString();
    });
    this.proc.stdin.on('error', () => {});
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
  }

  send(frame: Frame): void {
    this.proc.stdin.write(`${JSON.stringify(frame)}\n`);
  }

  sendRaw(line: string): void {
    this.proc.stdin.write(line);
  }

  /** Resolves with the first frame (at index >= from) matching pred; fails after WAIT_MS. */
  waitFor(pred: (f: Frame) => boolean, from = 0): Promise<Frame> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const hit = this.frames.slice(from).find(pred);
        if (!hit) return false;
        this.waiters = this.waiters.filter((w) => w !== waiter);
        clearTimeout(timer);
        resolve(hit);
        return true;
      };
      const waiter = (): void => {
        check();
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        const tail = this.frames
          .slice(-5)
          .map((f) => JSON.stringify(f).slice(0, 200))
          .join('\n');
        reject(new Error(`timed out waiting for a frame; last frames:\n${tail}\nstderr: ${this.stderr}`));
      }, WAIT_MS);
      this.waiters.push(waiter);
      check();
    });
  }

  async exitCode(): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('engine did not exit')), WAIT_MS);
    });
    try {
      return (await Promise.race([this.exited, timeout])).code;
    } finally {
      clearTimeout(timer);
    }
  }

  index(f: Frame): number {
    return this.frames.indexOf(f);
  }
}

const isResult = (f: Frame): boolean => f.type === 'result';
const isCanUseTool = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool';
const toolResults = (e: Engine): Frame[] =>
  e.frames
    .filter((f) => f.type === 'user' && Array.isArray(f.message?.content))
    .flatMap((f) => f.message.content as Frame[])
    .filter((b) => b.type === 'tool_result');

let engines: Engine[] = [];
let dirs: string[] = [];

function start(args: string[] = [], env: Record<string, string> = {}): Engine {
  const dir = mkdtempSync(join(tmpdir(), 'demo-engine-'));
  dirs.push(dir);
  const engine = new Engine(dir, args, env);
  engines.push(engine);
  return engine;
}

beforeAll(() => {
  const stale = MODULES.some((m) => {
    const out = join(ROOT, 'dist/agent/demo-engine', `${m}.js`);
    return !existsSync(out) || statSync(out).mtimeMs < statSync(join(ROOT, 'agent/demo-engine', `${m}.ts`)).mtimeMs;
  });
  if (stale) {
    try {
      execFileSync('npx', ['tsc', '-p', join(ROOT, 'tsconfig.json')], { cwd: ROOT, stdio: 'pipe', timeout: 120_000 });
    } catch {
      // Type errors in files being edited elsewhere still leave tsc's output in place.
    }
  }
  for (const m of MODULES) expect(existsSync(join(ROOT, 'dist/agent/demo-engine', `${m}.js`)), `${m}.js built`).toBe(true);
}, 150_000);

afterEach(() => {
  for (const e of engines) if (e.proc.exitCode === null && e.proc.signalCode === null) e.proc.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  engines = [];
  dirs = [];
});

describe('demo engine', () => {
  it('answers initialize like the CLI', async () => {
    const e = start();
    e.send(INIT);
    const reply = await e.waitFor((f) => f.type === 'control_response');
    expect(reply.response).toMatchObject({ subtype: 'success', request_id: 'init_1', pending_permission_requests: [] });
    expect(reply.response.response).toMatchObject({
      commands: [],
      agents: [],
      claude_code_version: 'demo',
      current_permission_mode: 'default',
      hook_on_failure_supported: true,
      pid: e.proc.pid,
      models: [{ value: 'demo-model', displayName: 'Demo', description: 'Built-in demo engine' }],
    });
    expect(reply.response.response.hooks_applied).toBeUndefined();
    e.send({ type: 'control_request', request_id: 'init_2', request: { subtype: 'initialize', hooks: {} } });
    const again = await e.waitFor((f) => f.response?.request_id === 'init_2');
    expect(again.response.response.hooks_applied).toBe(true);
  });

  it('answers an unknown control subtype with unsupported_request', async () => {
    const e = start();
    e.send({ type: 'control_request', request_id: 'c7', request: { subtype: 'no_such_subtype' } });
    const reply = await e.waitFor((f) => f.type === 'control_response');
    expect(reply.response).toMatchObject({ subtype: 'error', request_id: 'c7', error_code: 'unsupported_request' });
  });

  it('runs a plain turn to a success result, ignoring blank, non-object and keep_alive lines', async () => {
    const e = start(['--model', 'my-model']);
    e.send(INIT);
    e.sendRaw('\n   \n[1,2]\n"x"\n{"type":"keep_alive"}\n{"type":"bogus"}\n');
    e.sendRaw(`${JSON.stringify(prompt('Say hi'))}\r\n`);
    const result = await e.waitFor(isResult);
    const init = await e.waitFor((f) => f.type === 'system' && f.subtype === 'init');
    expect(init).toMatchObject({ cwd: e.cwd, model: 'my-model', permissionMode: 'default', claude_code_version: 'demo' });
    expect(init.tools).toEqual(expect.arrayContaining(['Bash', 'AskUserQuestion']));
    expect(init.session_id).toMatch(/^[0-9a-f-]{36}$/);
    const text = await e.waitFor((f) => f.type === 'assistant');
    expect(text.message.id).toMatch(/^msg_demo_/);
    expect(text.message.content[0].text).toBe('Hello from the Tether demo engine. You said: Say hi');
    expect(result).toMatchObject({
      subtype: 'success',
      is_error: false,
      result: 'Hello from the Tether demo engine. You said: Say hi',
      session_id: init.session_id,
      stop_reason: 'end_turn',
      terminal_reason: 'completed',
      total_cost_usd: 0,
      permission_denials: [],
    });
    expect(e.frames.some((f) => f.type === 'stream_event')).toBe(false);
  });

  it('runs the Bash tool after an allow answer (and reports session state)', async () => {
    const e = start([], { CLAUDE_CODE_SDK_READS_SESSION_STATE: '1' });
    e.send(INIT);
    e.send(prompt('Please create a file'));
    const ask = await e.waitFor(isCanUseTool);
    expect(ask.request).toMatchObject({
      tool_name: 'Bash',
      display_name: 'Bash',
      input: { command: "echo 'hello from tether' > tether-demo.txt", description: 'Write a demo file' },
    });
    expect(ask.request_id).toMatch(/^[0-9a-f-]{36}$/);
    const toolUse = e.frames.find((f) => f.type === 'assistant' && f.message.content[0].type === 'tool_use');
    expect(toolUse?.message.content[0].id).toBe(ask.request.tool_use_id);
    e.send(allow(ask, ask.request.input));
    const result = await e.waitFor(isResult);
    expect(result).toMatchObject({ subtype: 'success', is_error: false, result: 'Done: the command ran.', num_turns: 2 });
    expect(readFileSync(join(e.cwd, 'tether-demo.txt'), 'utf8')).toBe('hello from tether\n');
    expect(toolResults(e)).toEqual([
      expect.objectContaining({
        tool_use_id: ask.request.tool_use_id,
        content: '(Bash completed with no output)',
        is_error: false,
      }),
    ]);
    await e.waitFor((f) => f.subtype === 'session_state_changed' && f.state === 'idle');
    const states = e.frames.filter((f) => f.subtype === 'session_state_changed').map((f) => f.state);
    expect(states).toEqual(['running', 'requires_action', 'running', 'idle']);
  });

  it('does not run the Bash tool after a deny answer', async () => {
    const e = start();
    e.send(prompt('run something'));
    const ask = await e.waitFor(isCanUseTool);
    e.send(deny(ask, 'Not allowed by policy'));
    const result = await e.waitFor(isResult);
    expect(result).toMatchObject({ subtype: 'success', is_error: false, result: 'Understood, I did not run it.' });
    expect(result.permission_denials).toEqual([{ tool_name: 'Bash', tool_use_id: ask.request.tool_use_id, tool_input: ask.request.input }]);
    expect(toolResults(e)).toEqual([expect.objectContaining({ content: 'Not allowed by policy', is_error: true })]);
    expect(existsSync(join(e.cwd, 'tether-demo.txt'))).toBe(false);
  });

  it('asks an AskUserQuestion and replies with the chosen answer', async () => {
    const e = start();
    e.send(prompt('Ask me a question'));
    const ask = await e.waitFor(isCanUseTool);
    expect(ask.request).toMatchObject({ tool_name: 'AskUserQuestion', requires_user_interaction: true });
    const question = ask.request.input.questions[0];
    expect(question).toMatchObject({ question: 'Which color do you prefer?', header: 'Color', multiSelect: false });
    expect(question.options.map((o: Frame) => o.label)).toEqual(['Red', 'Blue']);
    e.send(allow(ask, { ...ask.request.input, answers: { [question.question]: 'Blue' } }));
    const result = await e.waitFor(isResult);
    expect(result).toMatchObject({ subtype: 'success', is_error: false, result: 'You chose: Blue.' });
  });

  it('interrupts a slow streamed turn and stays up for the next one', async () => {
    const e = start(['--include-partial-messages']);
    e.send(INIT);
    e.send(prompt('Tell me something slow'));
    const isDelta = (f: Frame): boolean => f.type === 'stream_event' && f.event.type === 'content_block_delta';
    await e.waitFor((f) => isDelta(f) && e.frames.filter(isDelta).length >= 3);
    e.send({ type: 'control_request', request_id: 'int_1', request: { subtype: 'interrupt' } });
    const reply = await e.waitFor((f) => f.response?.request_id === 'int_1');
    expect(reply.response).toMatchObject({ subtype: 'success', response: { still_queued: [] } });
    const result = await e.waitFor(isResult);
    expect(result).toMatchObject({ subtype: 'error_during_execution', is_error: true, terminal_reason: 'aborted_streaming' });
    const aborted = e.frames.find((f) => f.type === 'assistant' && f.aborted === true);
    expect(aborted?.message.content[0].text).toMatch(/^Counting slowly:/);
    expect(e.frames.some((f) => f.type === 'user' && f.message.content[0]?.text === '[Request interrupted by user]')).toBe(true);
    expect(e.index(reply)).toBeLessThan(e.index(result));

    const from = e.frames.length;
    e.send(prompt('hello again'));
    const next = await e.waitFor(isResult, from);
    expect(next).toMatchObject({ subtype: 'success', is_error: false, result_index: 1 });
    expect(e.proc.exitCode).toBeNull();
  });

  it('withdraws a pending can_use_tool on interrupt, ignores the late answer, exits 1 at EOF', async () => {
    const e = start();
    e.send(prompt('run it'));
    const ask = await e.waitFor(isCanUseTool);
    e.send({ type: 'control_request', request_id: 'int_1', request: { subtype: 'interrupt' } });
    const result = await e.waitFor(isResult);
    const cancel = await e.waitFor((f) => f.type === 'control_cancel_request');
    const reply = await e.waitFor((f) => f.response?.request_id === 'int_1');
    expect(cancel.request_id).toBe(ask.request_id);
    expect(e.index(cancel)).toBeLessThan(e.index(reply));
    expect(result).toMatchObject({ subtype: 'error_during_execution', is_error: true, terminal_reason: 'aborted_tools' });
    expect(result.permission_denials).toHaveLength(1);
    e.send(allow(ask, ask.request.input));
    e.proc.stdin.end();
    expect(await e.exitCode()).toBe(1);
    expect(existsSync(join(e.cwd, 'tether-demo.txt'))).toBe(false);
  });

  it('exits 1 on a non-JSON line', async () => {
    const e = start();
    e.send(INIT);
    e.sendRaw('this is not json\n');
    expect(await e.exitCode()).toBe(1);
    expect(e.stderr).toContain('Error parsing streaming input line (type=unknown, 16 chars): SyntaxError');
  });

  it('finishes the running turn at stdin EOF, then exits 0', async () => {
    const e = start();
    e.send(INIT);
    e.send(prompt('Say hi'));
    e.proc.stdin.end();
    expect(await e.exitCode()).toBe(0);
    expect(e.frames.filter(isResult)).toEqual([expect.objectContaining({ subtype: 'success', is_error: false })]);
  });

  it('exits 143 on SIGTERM', async () => {
    const e = start();
    e.send(INIT);
    await e.waitFor((f) => f.type === 'control_response');
    e.proc.kill('SIGTERM');
    expect(await e.exitCode()).toBe(143);
  });
});
