import { describe, expect, it } from 'vitest';
import {
  claudeTestEnv,
  initializeClaude,
  makeTempDir,
  spawnClaude,
  STREAM_JSON_ARGS,
  type ClaudeProcess,
  type Frame,
  type TempDir,
} from './support/claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeResponse } from './support/fake-anthropic.js';
import { waitFor } from './support/wait.js';

/**
 * What the real CLI does with prompts sent while a turn runs (docs/engine-protocol.md section
 * 3.2): their `priority`, `cancel_async_message`, `interrupt` with `cancel_queued`, and when
 * `--replay-user-messages` echoes them. The scripted model records every request, so a prompt
 * that never reached the model is shown not to.
 */

/** A slow answer: a turn that is still running while the test sends more. */
const SLOW: FakeResponse = { text: 'one two three four five six seven eight nine ten eleven twelve', chunk_delay_ms: 200 };
/** A turn with a tool round (Bash, allowed by flag), then a slow answer. */
const TOOL_TURN: FakeResponse[] = [
  { text: 'Running it.', tool_use: { name: 'Bash', input: { command: 'sleep 2', description: 'wait' } } },
  SLOW,
];

const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const prompt = (text: string, n: number, priority?: string) => ({
  type: 'user',
  message: { role: 'user', content: text },
  parent_tool_use_id: null,
  session_id: 'default',
  uuid: uuid(n),
  ...(priority ? { priority } : {}),
});
const control = (id: string, request: Record<string, unknown>) => ({ type: 'control_request', request_id: id, request });

const lifecycle = (f: Frame, n: number, state: string) => f.type === 'command_lifecycle' && f.command_uuid === uuid(n) && f.state === state;
const replayOf = (f: Frame, n: number) => f.type === 'user' && f.isReplay === true && f.uuid === uuid(n);
const resultFor = (n: number) => (f: Frame) =>
  f.type === 'result' && Array.isArray(f.user_message_uuids) && f.user_message_uuids.includes(uuid(n));
const answerTo = (id: string) => (f: Frame) => f.type === 'control_response' && f.response?.request_id === id;
const at = (cli: ClaudeProcess, match: (f: Frame) => boolean) => cli.frames.findIndex(match);

// At once: each test has its own CLI and fake model, and its time is waiting on the model's
// streamed answers and the tool's `sleep 2` (5 s CPU of 49 s alone).
describe.concurrent('the CLI with prompts sent mid-turn (priority, cancel_async_message, cancel_queued)', () => {
  /** A CLI of the test's own, killed (its fake model closed, its folders removed) when the test finishes. */
  async function start(
    onTestFinished: (fn: () => Promise<void>) => void,
    responses: FakeResponse[],
  ): Promise<{ cli: ClaudeProcess; fake: FakeAnthropic }> {
    const fake = await startFakeAnthropic({ responses, fallback: { text: 'OK.' } });
    const dirs: TempDir[] = [makeTempDir('tether-queue-home-'), makeTempDir('tether-queue-cwd-')];
    const [home, cwd] = dirs;
    const cli = spawnClaude({
      cwd: cwd.path,
      env: claudeTestEnv({ home: home.path, baseUrl: fake.url }),
      args: [...STREAM_JSON_ARGS, '--replay-user-messages', '--allowedTools', 'Bash'],
    });
    onTestFinished(async () => {
      await cli.kill();
      await fake.close();
      for (const d of dirs) d.cleanup();
    });
    await initializeClaude(cli, 30_000);
    return { cli, fake };
  }
  /** The model is streaming the first answer: a turn runs. */
  const streaming = (f: FakeAnthropic) => waitFor(() => f.textDeltasSent() > 0, 30_000, 'the first answer to stream');
  const reached = (f: FakeAnthropic, text: string) => f.requests.some((r) => r.raw.includes(text));

  it('"later" prompts wait until the running turn ends, then run together in the order sent; each is echoed when it starts; cancel_async_message drops a queued one before the model sees it', async ({
    onTestFinished,
  }) => {
    const { cli, fake } = await start(onTestFinished, [SLOW]);
    cli.send(prompt('first prompt', 1));
    await streaming(fake);
    cli.send(prompt('second prompt', 2, 'later'));
    cli.send(prompt('WITHDRAWN_TEXT', 3, 'later'));
    cli.send(prompt('fourth prompt', 4, 'later'));
    await cli.waitFor((f) => lifecycle(f, 4, 'queued'), 10_000);
    cli.send(control('c3', { subtype: 'cancel_async_message', message_uuid: uuid(3) }));
    cli.send(control('c9', { subtype: 'cancel_async_message', message_uuid: uuid(9) }));
    expect((await cli.waitFor(answerTo('c3'), 10_000)).response.response).toEqual({ cancelled: true, message_uuid: uuid(3) });
    expect((await cli.waitFor(answerTo('c9'), 10_000)).response.response).toEqual({ cancelled: false }); // never queued
    await cli.waitFor((f) => lifecycle(f, 3, 'cancelled'), 10_000);
    await cli.waitFor(resultFor(4), 60_000);

    // The queued prompts ran after the running turn, together: one turn, one request, in the order sent.
    expect(cli.frames.filter((f) => f.type === 'result').map((f) => f.user_message_uuids)).toEqual([[uuid(1)], [uuid(2), uuid(4)]]);
    const batched = fake.modelRequests().at(-1)!.raw;
    expect(batched.indexOf('second prompt')).toBeGreaterThan(0);
    expect(batched.indexOf('fourth prompt')).toBeGreaterThan(batched.indexOf('second prompt'));
    // The withdrawn one never reached the model.
    expect(reached(fake, 'WITHDRAWN_TEXT')).toBe(false);
    expect(cli.frames.some((f) => replayOf(f, 3))).toBe(false);
    // The echo comes when the prompt starts (after the turn before ended), not when it was accepted.
    expect(at(cli, (f) => lifecycle(f, 2, 'queued'))).toBeLessThan(at(cli, resultFor(1)));
    expect(at(cli, resultFor(1))).toBeLessThan(at(cli, (f) => lifecycle(f, 2, 'started')));
    expect(at(cli, resultFor(1))).toBeLessThan(at(cli, (f) => replayOf(f, 2)));
    // Once started, it can no longer be withdrawn.
    cli.send(control('c2', { subtype: 'cancel_async_message', message_uuid: uuid(2) }));
    expect((await cli.waitFor(answerTo('c2'), 10_000)).response.response).toEqual({ cancelled: false });
  }, 120_000);

  it('"next" (and no priority) is folded into the running turn at its tool round; it goes before "later" ones', async ({
    onTestFinished,
  }) => {
    const { cli, fake } = await start(onTestFinished, [...TOOL_TURN, { text: 'later answer' }, ...TOOL_TURN]);
    cli.send(prompt('first prompt', 1));
    await cli.waitFor((f) => f.type === 'assistant' && JSON.stringify(f.message?.content).includes('tool_use'), 30_000);
    cli.send(prompt('later prompt', 2, 'later'));
    cli.send(prompt('FOLDED_TEXT', 3, 'next'));
    const folded = await cli.waitFor(resultFor(3), 60_000);
    expect(folded.user_message_uuids).toEqual([uuid(1), uuid(3)]); // one turn answered both
    expect(at(cli, (f) => lifecycle(f, 3, 'started'))).toBeLessThan(at(cli, resultFor(1)));
    expect(at(cli, (f) => replayOf(f, 3))).toBeLessThan(at(cli, resultFor(1))); // echoed where it was folded in
    // The model read it beside the tool's result, in the same turn.
    const foldedRequest = fake.modelRequests().find((r) => r.raw.includes('FOLDED_TEXT'))!;
    expect(foldedRequest.raw).toContain('The user sent a new message while you were working');
    expect(foldedRequest.raw).toContain('tool_result');
    await cli.waitFor(resultFor(2), 60_000); // the "later" one: a turn of its own, after
    expect(at(cli, resultFor(3))).toBeLessThan(at(cli, resultFor(2)));
    // No priority: the same as "next".
    const from = cli.frames.length;
    cli.send(prompt('third turn', 4));
    await cli.waitFor((f) => f.type === 'assistant' && JSON.stringify(f.message?.content).includes('tool_use'), 30_000, from);
    cli.send(prompt('DEFAULT_TEXT', 5));
    expect((await cli.waitFor(resultFor(5), 60_000)).user_message_uuids).toEqual([uuid(4), uuid(5)]);
  }, 120_000);

  it('"now" cuts the running step (its tool is aborted) and runs at once, with the cut turn in its history', async ({ onTestFinished }) => {
    const { cli, fake } = await start(onTestFinished, TOOL_TURN);
    cli.send(prompt('first prompt', 1));
    await cli.waitFor((f) => f.type === 'assistant' && JSON.stringify(f.message?.content).includes('tool_use'), 30_000);
    cli.send(prompt('STEER_TEXT', 2, 'now'));
    const steered = await cli.waitFor(resultFor(2), 60_000);
    expect(steered.user_message_uuids).toEqual([uuid(2)]);
    const first = cli.frames.find(resultFor(1))!;
    expect(first.subtype).toBe('success');
    expect(cli.frames.some((f) => lifecycle(f, 1, 'cancelled'))).toBe(true);
    expect(at(cli, resultFor(1))).toBeLessThan(at(cli, (f) => replayOf(f, 2)));
    // The steer's request carries the aborted tool's result, then the steer.
    const request = fake.modelRequests().find((r) => r.raw.includes('STEER_TEXT'))!;
    expect(JSON.stringify(request.lastMessage)).toContain('aborted before completion');
    expect(JSON.stringify(request.lastMessage)).toContain('STEER_TEXT');
  }, 120_000);

  it('an interrupt keeps the queue (still_queued, run next) unless cancel_queued: then it answers the cancelled uuids and nothing more runs', async ({
    onTestFinished,
  }) => {
    const { cli, fake } = await start(onTestFinished, [SLOW, { text: 'second answer' }, SLOW]);
    cli.send(prompt('first prompt', 1));
    await streaming(fake);
    cli.send(prompt('kept prompt', 2, 'later'));
    await cli.waitFor((f) => lifecycle(f, 2, 'queued'), 10_000);
    cli.send(control('i1', { subtype: 'interrupt' }));
    expect((await cli.waitFor(answerTo('i1'), 10_000)).response.response).toEqual({ still_queued: [uuid(2)] });
    expect((await cli.waitFor(resultFor(2), 60_000)).subtype).toBe('success');

    const deltas = fake.textDeltasSent();
    cli.send(prompt('third prompt', 3));
    await waitFor(() => fake.textDeltasSent() > deltas, 30_000, 'the third answer to stream');
    cli.send(prompt('CLEARED_ONE', 4, 'later'));
    cli.send(prompt('CLEARED_TWO', 5, 'next'));
    await cli.waitFor((f) => lifecycle(f, 5, 'queued'), 10_000);
    cli.send(control('i2', { subtype: 'interrupt', cancel_queued: true }));
    expect((await cli.waitFor(answerTo('i2'), 10_000)).response.response).toEqual({ still_queued: [], cancelled: [uuid(4), uuid(5)] });
    await cli.waitFor(resultFor(3), 30_000);
    const requests = fake.modelRequests().length;
    // A prompt after it runs normally: the queue is empty, so nothing else ran before it.
    cli.send(prompt('after the stop', 6));
    await cli.waitFor(resultFor(6), 60_000);
    expect(fake.modelRequests().length).toBe(requests + 1);
    expect(reached(fake, 'CLEARED_ONE') || reached(fake, 'CLEARED_TWO')).toBe(false);
    expect(cli.frames.some((f) => lifecycle(f, 4, 'cancelled')) && cli.frames.some((f) => lifecycle(f, 5, 'cancelled'))).toBe(true);
  }, 120_000);
});
