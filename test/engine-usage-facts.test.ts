import { afterEach, describe, expect, it } from 'vitest';
import {
  claudeTestEnv,
  initializeClaude,
  makeTempDir,
  spawnClaude,
  STREAM_JSON_ARGS,
  userMessage,
  type ClaudeProcess,
  type TempDir,
} from './support/claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';

/**
 * What the real CLI reports of a turn's usage in its `result` (docs/engine-protocol.md 4.1),
 * against a scripted model with known token counts: `usage` is the turn's own (summed over
 * its model calls), while `total_cost_usd` and `modelUsage` grow over the process's turns.
 * The usage ledger (gateway/usage/turn-usage.ts) books each turn on these facts.
 */
describe('the CLI reports usage per turn and cost per process', () => {
  let cli: ClaudeProcess | undefined;
  let fake: FakeAnthropic | undefined;
  const dirs: TempDir[] = [];
  afterEach(async () => {
    await cli?.kill();
    await fake?.close();
    for (const d of dirs.splice(0)) d.cleanup();
    cli = fake = undefined;
  });

  it('usage is the turn own (two calls summed), total_cost_usd and modelUsage are cumulative, result_index counts turns', async () => {
    fake = await startFakeAnthropic({
      responses: [
        {
          text: 'Listing.',
          tool_use: { name: 'Bash', input: { command: 'true', description: 'nothing' } },
          usage: { input_tokens: 100, output_tokens: 10 },
        },
        { text: 'Done.', usage: { input_tokens: 200, output_tokens: 20, cache_read_input_tokens: 50 } },
        { text: 'Second.', usage: { input_tokens: 1000, output_tokens: 100, cache_creation_input_tokens: 30 } },
      ],
    });
    const [home, cwd] = [makeTempDir('tether-usage-home-'), makeTempDir('tether-usage-cwd-')];
    dirs.push(home, cwd);
    cli = spawnClaude({
      cwd: cwd.path,
      env: claudeTestEnv({ home: home.path, baseUrl: fake.url }),
      args: [...STREAM_JSON_ARGS, '--allowedTools', 'Bash'],
    });
    await initializeClaude(cli, 30_000);
    cli.send(userMessage('first'));
    const first = await cli.waitFor((f) => f.type === 'result', 60_000);
    const at = cli.frames.indexOf(first) + 1;
    cli.send(userMessage('second'));
    const second = await cli.waitFor((f) => f.type === 'result', 60_000, at);

    expect(first.usage).toMatchObject({
      input_tokens: 300,
      output_tokens: 30,
      cache_read_input_tokens: 50,
      cache_creation_input_tokens: 0,
    });
    expect(second.usage).toMatchObject({
      input_tokens: 1000,
      output_tokens: 100,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 30,
    });
    expect(first.result_index).toBe(0);
    expect(second.result_index).toBe(1);
    expect(first.total_cost_usd).toBeGreaterThan(0);
    expect(second.total_cost_usd).toBeGreaterThan(first.total_cost_usd);
    const models = Object.keys(second.modelUsage);
    expect(models).toHaveLength(1);
    const [m] = models;
    expect(second.modelUsage[m].inputTokens).toBe(1300);
    expect(second.modelUsage[m].costUSD).toBeCloseTo(second.total_cost_usd, 9);
  }, 150_000);
});
