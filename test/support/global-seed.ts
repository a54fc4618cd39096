import type { TestProject } from 'vitest/node';
import { firstTimeThisRun } from './once-per-run.js';
import { replayLine, SEED_ENV, seedFromEnv } from './seed-value.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** This run's seed (test/support/seed.ts). */
    testSeed: number;
  }
}

/** Vitest global setup: picks the run's seed once, prints it and hands it to every test file. */
export default function setup(project: TestProject): void {
  const seed = seedFromEnv();
  // Runs once per vitest project: the first leaves its seed in the environment, so every
  // project (and every worker) draws from the same one, printed once.
  process.env[SEED_ENV] = String(seed);
  project.provide('testSeed', seed);
  if (firstTimeThisRun('seed')) process.stdout.write(`${replayLine(seed)}\n`);
}
