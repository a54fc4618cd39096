/**
 * Proves the scripted fake Messages API is good enough for the real CLI to run whole turns:
 * permission allow/deny and an AskUserQuestion round trip over stream-json stdio.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  claudeTestEnv,
  controlSuccess,
  initializeClaude,
  makeTempDir,
  spawnClaude,
  userMessage,
  type ClaudeProcess,
  type Frame,
} from './support/claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './support/fake-anthropic.js';

const STEP_MS = 10_000;
const TEST_MS = 20_000;

const BASH_CALL = { id: 'toolu_01', name: 'Bash', input: { command: 'echo hi > made.txt', description: 'write file' } };
const QUESTION = 'Which database should we use?';
const ASK_CALL = {
  id: 'toolu_ask1',
  name: 'AskUserQuestion',
  input: {
    questions: [
      {
        question: QUESTION,
        header: 'Database',
        options: [
          { label: 'Postgres', description: 'Relational, robust' },
          { label: 'SQLite', description: 'Embedded, zero setup' },
        ],
        multiSelect: false,
      },
    ],
  },
};

const teardown: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const step of teardown.splice(0).reverse()) await step();
});

interface Rig {
  fake: FakeAnthropic;
  cli: ClaudeProcess;
  cwd: string;
}

/** Fake API + fresh HOME + empty cwd + an initialized CLI, all registered for teardown. */
async function startRig(scenario: FakeScenario): Promise<Rig> {
  const fake = await startFakeAnthropic(scenario);
  teardown.push(() => fake.close());
  const home = makeTempDir('tether-home-');
  const cwd = makeTempDir('tether-cwd-');
  teardown.push(home.cleanup, cwd.cleanup);
  const cli = spawnClaude({ cwd: cwd.path, env: claudeTestEnv({ home: home.path, baseUrl: fake.url }) });
  teardown.push(() => cli.kill());
  await initializeClaude(cli, STEP_MS);
  return { fake, cli, cwd: cwd.path };
}

const isPermissionAsk = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool';
const isResult = (f: Frame): boolean => f.type === 'result';

/** Closes stdin and expects a clean exit, as after every successful turn. */
async function expectCleanExit(cli: ClaudeProcess): Promise<void> {
  cli.closeStdin();
  expect(await cli.waitForExit(STEP_MS)).toEqual({ code: 0, signal: null });
}

describe('fake Anthropic API driving the real CLI', () => {
  it(
    'runs an allowed Bash call: the file is made and the turn succeeds',
    async () => {
      const { fake, cli, cwd } = await startRig({ responses: [{ text: 'Let me run it.', tool_use: BASH_CALL }, { text: 'Done.' }] });

      cli.send(userMessage('Create made.txt'));
      const ask = await cli.waitFor(isPermissionAsk, STEP_MS);
      expect(ask.request).toMatchObject({ tool_name: 'Bash', tool_use_id: 'toolu_01', input: BASH_CALL.input });
      cli.send(controlSuccess(ask.request_id, { behavior: 'allow', updatedInput: ask.request.input }));

      const result = await cli.waitFor(isResult, STEP_MS);
      expect(result).toMatchObject({ subtype: 'success', is_error: false, result: 'Done.' });
      expect(readFileSync(join(cwd, 'made.txt'), 'utf8')).toBe('hi\n');
      expect(fake.lastToolResults()).toEqual([expect.objectContaining({ tool_use_id: 'toolu_01', is_error: false })]);
      expect(fake.modelRequests()).toHaveLength(2);
      await expectCleanExit(cli);
    },
    TEST_MS,
  );

  it(
    'runs a denied Bash call: no file, and the model sees the denial as an error tool_result',
    async () => {
      const { fake, cli, cwd } = await startRig({ responses: [{ text: 'Let me run it.', tool_use: BASH_CALL }, { text: 'Understood.' }] });
      const denial = 'Not allowed by tether test policy';

      cli.send(userMessage('Create made.txt'));
      const ask = await cli.waitFor(isPermissionAsk, STEP_MS);
      cli.send(controlSuccess(ask.request_id, { behavior: 'deny', message: denial }));

      const result = await cli.waitFor(isResult, STEP_MS);
      expect(result).toMatchObject({ is_error: false, permission_denials: [expect.objectContaining({ tool_use_id: 'toolu_01' })] });
      expect(existsSync(join(cwd, 'made.txt'))).toBe(false);
      const [toolResult] = fake.lastToolResults();
      expect(toolResult).toMatchObject({ tool_use_id: 'toolu_01', is_error: true });
      expect(toolResult?.content).toContain(denial);
      await expectCleanExit(cli);
    },
    TEST_MS,
  );

  it(
    'round-trips AskUserQuestion: answers keyed by question text reach the model',
    async () => {
      const { fake, cli } = await startRig({ responses: [{ text: 'I need to ask.', tool_use: ASK_CALL }, { text: 'Going with it.' }] });

      cli.send(userMessage('Pick a database'));
      const ask = await cli.waitFor(isPermissionAsk, STEP_MS);
      expect(ask.request).toMatchObject({ tool_name: 'AskUserQuestion', requires_user_interaction: true });
      const updatedInput = { ...ask.request.input, answers: { [QUESTION]: 'SQLite' } };
      cli.send(controlSuccess(ask.request_id, { behavior: 'allow', updatedInput }));

      const result = await cli.waitFor(isResult, STEP_MS);
      expect(result).toMatchObject({ is_error: false, result: 'Going with it.' });
      const [toolResult] = fake.lastToolResults();
      expect(toolResult?.tool_use_id).toBe('toolu_ask1');
      expect(toolResult?.is_error).not.toBe(true);
      expect(toolResult?.content).toContain('SQLite');
      await expectCleanExit(cli);
    },
    TEST_MS,
  );
});

describe('fake Anthropic API contract', () => {
  const post = (fake: FakeAnthropic, path: string, body: object): Promise<Response> =>
    fetch(`${fake.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('answers side calls without consuming the script', async () => {
    const fake = await startFakeAnthropic({ responses: [{ text: 'scripted' }] });
    teardown.push(() => fake.close());
    const messages = [{ role: 'user', content: 'Hi' }];

    const check = await post(fake, '/v1/messages?beta=true', { model: 'm', max_tokens: 1, messages });
    expect(await check.json()).toMatchObject({ type: 'message', content: [{ type: 'text' }], stop_reason: 'end_turn' });
    const count = await post(fake, '/v1/messages/count_tokens?beta=true', { model: 'm', messages });
    expect(await count.json()).toEqual({ input_tokens: expect.any(Number) });
    expect((await fetch(`${fake.url}/anything`)).status).toBe(200);

    const sse = await (await post(fake, '/v1/messages?beta=true', { model: 'm', stream: true, max_tokens: 5, messages })).text();
    const textDeltas = [...sse.matchAll(/"text_delta","text":"([^"]*)"/g)].map((m) => m[1]).join('');
    expect(textDeltas).toBe('scripted');
    expect(fake.requests.map((r) => r.answeredWith)).toEqual(['aux', 'aux', 'probe', 'script[0]']);
  });

  it('closes promptly while a scripted reply is still pending', async () => {
    const fake = await startFakeAnthropic({ responses: [{ text: 'late', delay_ms: 30_000 }] });
    teardown.push(() => fake.close());
    const pending = post(fake, '/v1/messages', { model: 'm', stream: true, messages: [] }).catch(() => 'aborted');
    await expect.poll(() => fake.requests.length, { timeout: 2_000 }).toBe(1);
    const started = Date.now();
    await fake.close();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await pending).toBe('aborted');
  });
});
