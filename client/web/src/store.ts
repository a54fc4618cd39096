import { useEffect, useRef, useState } from 'preact/hooks';

/** Runs `notify` later, once for any number of calls meanwhile (see `Store`'s `pace`). */
export type Pace = (notify: () => void) => void;

/**
 * A value the page shows, with change notification (the page's only state container). With a
 * `pace`, the listeners hear of changes when it says (once for all changes meanwhile) while
 * `get()` has every change at once: for a value that changes per frame received.
 */
export class Store<T> {
  private readonly listeners = new Set<() => void>();
  private due = false;
  constructor(
    private value: T,
    private readonly pace?: Pace,
  ) {}
  get(): T {
    return this.value;
  }
  set(next: T): void {
    this.value = next;
    if (!this.pace) return this.notify();
    if (this.due) return;
    this.due = true;
    this.pace(() => {
      this.due = false;
      this.notify();
    });
  }
  private notify(): void {
    for (const l of [...this.listeners]) l();
  }
  update(patch: Partial<T>): void {
    this.set({ ...this.value, ...patch });
  }
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/**
 * Re-renders the calling component whenever the store changes. The subscription is made in an
 * effect, after the render: a change between the two (an answer that came meanwhile) is caught
 * when subscribing, or the component would show the older value until the next change.
 */
export function useStore<T>(store: Store<T>): T {
  const [, bump] = useState(0);
  const value = store.get();
  const rendered = useRef(value);
  rendered.current = value;
  useEffect(() => {
    const off = store.subscribe(() => bump((n) => n + 1));
    if (!Object.is(store.get(), rendered.current)) bump((n) => n + 1);
    return off;
  }, [store]);
  return value;
}

/** Re-renders the calling component only when `select` of the store's value changes (Object.is); a change before it subscribed too. */
export function useStoreSelect<T, S>(store: Store<T>, select: (value: T) => S): S {
  const [, bump] = useState(0);
  const picked = select(store.get());
  const last = useRef(picked);
  last.current = picked;
  const pick = useRef(select);
  pick.current = select;
  useEffect(() => {
    const changed = () => !Object.is(pick.current(store.get()), last.current);
    const off = store.subscribe(() => changed() && bump((n) => n + 1));
    if (changed()) bump((n) => n + 1);
    return off;
  }, [store]);
  return picked;
}

/** How soon a page that gets no animation frames (a hidden tab) hears of a change anyway. */
const HIDDEN_PAGE_MS = 100;

/**
 * A `Pace` of one notification per animation frame: the browser paints no more often, and a
 * burst of frames received one task each (a 2,000-turn session arriving live) is then rendered
 * a few times, not once per frame. A hidden page gets no animation frames, so a timer too.
 */
export const perAnimationFrame: Pace = (notify) => {
  // Whichever comes first cancels the other: a hidden page would otherwise keep one animation
  // frame callback per change queued until it is shown again, and a shown one a timer per frame.
  const frame = requestAnimationFrame(() => {
    clearTimeout(timer);
    notify();
  });
  const timer = setTimeout(() => {
    cancelAnimationFrame(frame);
    notify();
  }, HIDDEN_PAGE_MS);
};
