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
  afterEach(async () => {
    const errors: unknown[] = [];
    for (const step of steps.splice(0).reverse()) {
      try {
        await step();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length && !opts.tolerant) throw errors[0];
  });
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
