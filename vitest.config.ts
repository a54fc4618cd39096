import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    pool: 'forks',
    // Two cores: real-CLI tests are heavy, keep parallelism modest.
    maxWorkers: 2,
    reporters: ['default', './test/support/slowest-files.ts'],
    // The run's seed for random fault schedules and fast-check (TETHER_TEST_SEED replays it).
    // ... and one line per missing program (chromium, nats-server) whose tests skip; CI=true fails instead.
    globalSetup: ['./test/support/global-seed.ts', './test/support/global-tools.ts'],
    setupFiles: ['./test/support/seed-setup.ts'],
  },
});
