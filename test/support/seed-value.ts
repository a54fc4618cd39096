/** The variable that replays a run's random choices (FC_SEED, the older name, is still read). */
export const SEED_ENV = 'TETHER_TEST_SEED';

/** Largest seed: fast-check takes a 32-bit signed integer. */
const MAX_SEED = 2 ** 31 - 1;

/**
 * The run's seed: TETHER_TEST_SEED (else FC_SEED) when set, else a fresh random one. Anything
 * else than a whole number from 0 to 2^31-1 is refused with the variable's name, so a mistyped
 * replay does not silently run another schedule.
 */
export function seedFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const name = env[SEED_ENV] ? SEED_ENV : env.FC_SEED ? 'FC_SEED' : undefined;
  if (!name) return Math.floor(Math.random() * MAX_SEED);
  const text = env[name]!.trim();
  const seed = Number(text);
  if (!/^\d+$/.test(text) || seed > MAX_SEED) throw new Error(`${name} must be a whole number from 0 to ${MAX_SEED}, got "${env[name]}"`);
  return seed;
}

/** The line that says how to replay this run's random choices. */
export function replayLine(seed: number, where?: string): string {
  return `random choices of this run came from seed ${seed}: replay them with ${SEED_ENV}=${seed}${where ? ` npx vitest run ${where}` : ''}`;
}
