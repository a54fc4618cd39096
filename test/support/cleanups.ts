import { afterEach } from 'vitest';
import { makeTempDir, type TempDir } from './claude-cli.js';

/** Teardown steps a test registers as it goes. */
export interface Cleanups {
  /** Adds steps; after the test they run last-added first. */
  push(...steps: (() => unknown)[]): void;
  /** A temporary folder, removed after the test. */
  tempDir(prefix: string): TempDir;
  /** Stops (or closes) `thing` after the test; returns it, so a test can write `const rig = cleanups.own(await startRig())`. */
  own<T extends { stop(): unknown } | { close(): unknown }>(thing: T): T;
}

/**
 * Teardown for each test of the calling describe block: every step runs, last-added first,
 * even when one fails; then the first failure fails the test (unless `tolerant`: for tests
 * whose steps may find their object already closed by the test itself).
 */
export function cleanupsPerTest(opts: { tolerant?: boolean } = {}): Cleanups {
  const steps: (() => unknown)[] = [];
  afterEach(() => runSteps(steps.splice(0), opts));
  return cleanupsInto(steps);
}

/**
 * The same for one test, a concurrent one too (`cleanupsPerTest` runs every test's steps after
 * each test, which would stop a neighbour's rig mid-run): pass the test context's onTestFinished.
 */
export function cleanupsOfTest(onTestFinished: (fn: () => Promise<void>) => void, opts: { tolerant?: boolean } = {}): Cleanups {
  const steps: (() => unknown)[] = [];
  onTestFinished(() => runSteps(steps.splice(0), opts));
  return cleanupsInto(steps);
}

async function runSteps(steps: (() => unknown)[], opts: { tolerant?: boolean }): Promise<void> {
  const errors: unknown[] = [];
  for (const step of steps.reverse()) {
    try {
      await step();
    } catch (err) {
      errors.push(err);
    }
  }
  if (errors.length && !opts.tolerant) throw errors[0];
}

function cleanupsInto(steps: (() => unknown)[]): Cleanups {
  return {
    push: (...more) => void steps.push(...more),
    own(thing) {
      steps.push(() => ('stop' in thing ? thing.stop() : thing.close()));
      return thing;
    },
    tempDir(prefix) {
      const dir = makeTempDir(prefix);
      steps.push(() => dir.cleanup());
      return dir;
    },
  };
}
