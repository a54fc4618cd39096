import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { randomInt, seededRandom } from './support/seed.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const VITEST = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));

/** Runs vitest on the seed fixture (test/fixtures/seed) with `env`; its whole output. */
function runFixture(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [VITEST, 'run', '--config', 'test/fixtures/seed/vitest.config.ts'],
      { cwd: ROOT, env: { ...process.env, TETHER_TEST_SEED: '', FC_SEED: '', CI: '', ...env }, timeout: 60_000 },
      (_err, stdout, stderr) => resolve({ code: child.exitCode, output: stdout + stderr }),
    );
  });
}

describe('random schedules replay from a seed (test/support/seed.ts)', () => {
  it('a seed gives the same numbers, another seed others', () => {
    const draw = (seed: number, label: string) => Array.from({ length: 8 }, seededRandom(seed, label));
    expect(draw(42, 't')).toEqual(draw(42, 't'));
    expect(draw(42, 't')).not.toEqual(draw(43, 't'));
    expect(draw(42, 't')).not.toEqual(draw(42, 'u'));
    for (const x of draw(7, 'range')) expect(x >= 0 && x < 1).toBe(true);
  });

  it('a failure prints the seed, and the printed seed replays the same draws and fast-check inputs', async () => {
    const first = await runFixture({});
    expect(first.code).toBe(1);
    const seed = /replay them with TETHER_TEST_SEED=(\d+) npx vitest run \S*replay\.fixture\.ts -t "draws a schedule and fails"/.exec(
      first.output,
    )?.[1];
    expect(seed, `the failure names the seed:\n${first.output}`).toBeDefined();
    const drawsOf = (out: string) => /draws=(\[[^\]]*\]) fast-check=(-?\d+)/.exec(out)?.slice(1);
    const again = await runFixture({ TETHER_TEST_SEED: seed });
    expect(drawsOf(again.output)).toEqual(drawsOf(first.output));
    // The draws are the helper's own sequence for that seed and test name.
    const expected = seededRandom(Number(seed), 'draws a schedule and fails');
    expect(JSON.parse(drawsOf(again.output)![0])).toEqual(Array.from({ length: 5 }, () => randomInt(expected, 0, 1_000_000)));
  });

  it('a seed that is not a whole number is refused, naming the variable', async () => {
    const r = await runFixture({ TETHER_TEST_SEED: 'abc' });
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('TETHER_TEST_SEED must be a whole number from 0 to 2147483647, got "abc"');
  });
});
