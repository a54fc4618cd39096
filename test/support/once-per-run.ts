/**
 * True the first time `what` is asked about in this process, false after. Vitest runs each
 * global setup once per project (vitest.config.ts has two), and a run says its seed and its
 * missing programs once. A registered symbol, so separate module instances share the answer.
 */
export function firstTimeThisRun(what: string): boolean {
  const key = Symbol.for(`tether.test.once.${what}`);
  const g = globalThis as Record<symbol, true | undefined>;
  if (g[key]) return false;
  g[key] = true;
  return true;
}
