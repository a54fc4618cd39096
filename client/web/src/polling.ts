import { useEffect } from 'preact/hooks';

/**
 * Fetches now and every `everyMs` while the component shows (and again when `deps` change):
 * `fetch` resolves with what to show, handed to `show` unless the component went away
 * meanwhile. A failed round shows nothing (the banner says when the link is down); the next
 * round tries again.
 */
export function usePolling<T>(fetch: () => Promise<T>, show: (value: T) => void, everyMs: number, deps: unknown[] = []): void {
  useEffect(() => {
    let stop = false;
    const load = async () => {
      try {
        const value = await fetch();
        if (!stop) show(value);
      } catch {
        // nothing to show this round
      }
    };
    void load();
    const t = setInterval(load, everyMs);
    return () => {
      stop = true;
      clearInterval(t);
    };
  }, deps);
}
