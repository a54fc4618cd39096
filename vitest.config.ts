import { existsSync } from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';
import { KNOWN_SLOW_FILES } from './test/support/known-slow-files.js';
import { ISOLATED_FILES } from './test/support/isolated-files.js';
import SlowFirst from './test/support/slow-first.js';

for (const [list, files] of [
  ['isolated-files.ts', ISOLATED_FILES.map(([f]) => f)],
  ['known-slow-files.ts (node scripts/known-slow-files.mjs makes it again)', KNOWN_SLOW_FILES.map(([f]) => f)],
] as const) {
  const missing = files.filter((f) => !existsSync(f));
  if (missing.length) throw new Error(`test/support/${list} names files that do not exist: ${missing.join(', ')}`);
}

const isolated = ISOLATED_FILES.map(([f]) => f);

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    // expect.poll's own default (1 s) is shorter than a loaded 2-CPU machine takes to show a
    // page's change: with four files at a time, one of them Chromium's, a poll that needs a
    // render, a frame from the gateway and an answer from an engine failed at 1 s.
    expect: { poll: { timeout: 10_000 } },
    pool: 'forks',
    // Four files at a time on two cores: many files mostly wait (sockets, child processes,
    // timers); two -> four took the suite from ~440 to ~330 s (2026-11). Six was tried on a
    // clean clone of 2026-12-02 (194 files): 447 s against four's 506 s on a quiet machine,
    // the two CPUs 96 % busy, but with anything else running three real-CLI and Chromium
    // tests timed out. The suite is CPU-bound: only less CPU makes it faster (README, Tests).
    maxWorkers: 4,
    reporters: ['default', './test/support/slowest-files.ts'],
    // The known-slow files start first (a clean clone has no vitest cache to order by).
    sequence: { sequencer: SlowFirst },
    // The run's seed for random fault schedules and fast-check (TETHER_TEST_SEED replays it).
    // ... and one line per missing program (chromium, nats-server) whose tests skip; CI=true fails instead;
    // and the run's one Chromium, started when a file first asks for it.
    globalSetup: ['./test/support/global-seed.ts', './test/support/global-tools.ts', './test/support/global-chromium.ts'],
    setupFiles: ['./test/support/file-cpu.ts', './test/support/seed-setup.ts'],
    // Files share worker processes (their imports are paid once per worker, not once per file);
    // the few that change process-wide state get a fresh process each (isolated-files.ts).
    projects: [
      {
        extends: true,
        test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...isolated], isolate: false },
      },
      { extends: true, test: { name: 'isolated', include: [...isolated] } },
    ],
  },
});
