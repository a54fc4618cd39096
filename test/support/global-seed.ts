import type { TestProject } from 'vitest/node';
import { replayLine, seedFromEnv } from './seed-value.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** This run's seed (test/support/seed.ts). */
    testSeed: number;
  }
}

/** Vitest global setup: picks the run's seed once, prints it and hands it to every test file. */
export default function setup(project: TestProject): void {
  const seed = seedFromEnv();
  project.provide('testSeed', seed);
  process.stdout.write(`${replayLine(seed)}\n`);
}
