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
  },
});
