import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    pool: 'forks',
    // Two files at a time. Four took the suite from ~490 to ~330 s on a quiet machine (most of a
    // file's time is waiting), but live-tokens' "tether agent and tether chat --json renew from
    // their token files" then stalled in 2 of 5 full runs (a prompt after the expiries got no
    // result within 15 s; cause not yet found): four again once that is understood.
    maxWorkers: 2,
    reporters: ['default', './test/support/slowest-files.ts'],
    // The run's seed for random fault schedules and fast-check (TETHER_TEST_SEED replays it).
    // ... and one line per missing program (chromium, nats-server) whose tests skip; CI=true fails instead.
    globalSetup: ['./test/support/global-seed.ts', './test/support/global-tools.ts'],
    setupFiles: ['./test/support/seed-setup.ts'],
  },
});
