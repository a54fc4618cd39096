import { afterEach } from 'vitest';

/** What per-test state may hold: things that stop or close, alone or in lists. */
type Closable = { stop(): unknown } | { close(): unknown };

/**
 * State one test fills in (a rig, the channels or pipes it opens), torn down after each test
 * of the calling describe block: first every item of every list is closed, then each single
 * value is stopped (or closed); then the state is reset to `fresh()`. The object stays the
 * same and its lists are emptied in place, so tests may keep references to either.
 */
export function perTest<T extends Record<string, Closable | Closable[] | undefined>>(fresh: () => T): T {
  const state = fresh();
  afterEach(async () => {
    const values = Object.values(state);
    try {
      for (const list of values) if (Array.isArray(list)) for (const item of list) await shut(item);
      for (const one of values) if (one && !Array.isArray(one)) await shut(one);
    } finally {
      const target = state as Record<string, unknown>;
      for (const [key, value] of Object.entries(fresh())) {
        const current = target[key];
        if (Array.isArray(current) && Array.isArray(value)) current.splice(0, current.length, ...value);
        else target[key] = value;
      }
    }
  });
  return state;
}

async function shut(thing: Closable): Promise<void> {
  await ('stop' in thing ? thing.stop() : thing.close());
}
