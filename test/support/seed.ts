import { expect, inject } from 'vitest';
import { seedFromEnv } from './seed-value.js';

/**
 * This run's seed (test/support/global-seed.ts picks it; TETHER_TEST_SEED gives it back). Every
 * random choice a test makes, a fault schedule or fast-check's inputs, comes from it, so a
 * failure's schedule can be replayed. Replaying gives the same choices, not the same timing:
 * a fault that needs a race may take a few runs.
 */
// Under another vitest configuration (no global setup) the file picks its own, the same way.
export const TEST_SEED: number = inject('testSeed') ?? seedFromEnv();

/** Random numbers in [0, 1), each test's own: from the seed and the test's name (mulberry32). */
export type Random = () => number;

export function seededRandom(seed: number, label = ''): Random {
  let a = (seed ^ hashOf(label)) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const perTest = new Map<string, Random>();

/**
 * The current test's random numbers: one sequence per test name, continued by every call in
 * that test, so running one test alone (-t) replays it too.
 */
export function testRandom(): Random {
  const name = expect.getState().currentTestName ?? '';
  let random = perTest.get(name);
  if (!random) perTest.set(name, (random = seededRandom(TEST_SEED, name)));
  return random;
}

/** A whole number from lo to hi, both included. */
export function randomInt(random: Random, lo: number, hi: number): number {
  return lo + Math.floor(random() * (hi - lo + 1));
}

/** FNV-1a of a label: separates the sequences of tests that share the seed. */
function hashOf(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
