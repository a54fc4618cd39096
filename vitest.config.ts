import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    pool: 'forks',
    // Four files at a time on two cores: most of a file's time is waiting (sockets, child
    // processes, timers), and four took the suite from ~440 to ~330 s. (The live-tokens stall
    // seen at four was its 2-s tokens expiring before a renewal under load: fixed.)
    maxWorkers: 4,
    reporters: ['default', './test/support/slowest-files.ts'],
    // The run's seed for random fault schedules and fast-check (TETHER_TEST_SEED replays it).
    // ... and one line per missing program (chromium, nats-server) whose tests skip; CI=true fails instead.
    globalSetup: ['./test/support/global-seed.ts', './test/support/global-tools.ts'],
    setupFiles: ['./test/support/seed-setup.ts'],
  },
});
