/**
 * The tests' one way to wait: for a promise, or for a condition, always bounded. A wait that
 * runs out throws `timed out after N ms waiting for WHAT`, so a failing test says what never
 * happened instead of hanging. (No sleeps that hope something happened meanwhile.)
 */

/** How often {@link waitFor} looks at its condition. */
const POLL_MS = 20;

/**
 * `p`, or a rejection once `ms` have passed without it settling. `what` may be a function,
 * asked only on timeout (to describe the state then).
 */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string | (() => string)): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<T>((_, reject) => {
      t = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${typeof what === 'function' ? what() : what}`)), ms);
    }),
  ]);
}

/**
 * Resolves once `cond` holds (checked at once, then every 20 ms), with the ms it took; throws
 * when it still does not hold after `ms` (`what` may be a function, asked only then).
 */
export async function waitFor(cond: () => boolean | Promise<boolean>, ms: number, what: string | (() => string)): Promise<number> {
  const start = Date.now();
  while (!(await cond())) {
    if (Date.now() - start > ms) throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  return Date.now() - start;
}

/**
 * Resolves once `read()` gives the same value twice in a row, POLL_MS apart (a flow that has
 * stopped: a queue held by backpressure, a reader that stopped pulling), with that value.
 */
export async function steady<T>(read: () => T, ms: number, what: string): Promise<T> {
  let last: T | typeof NOTHING = NOTHING;
  await waitFor(() => last === (last = read()), ms, what);
  return last as T;
}

const NOTHING = Symbol('nothing yet');

/**
 * Reads a value until `ok(value)` holds and resolves with it; on timeout the error shows the
 * last value read (a Map as an object).
 */
export async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string, ms = 15_000): Promise<T> {
  let last: T | undefined;
  try {
    await waitFor(async () => ok((last = await read())), ms, what);
  } catch (err) {
    throw new Error(`${(err as Error).message}; last: ${JSON.stringify(last instanceof Map ? Object.fromEntries(last) : last)}`);
  }
  return last as T;
}
