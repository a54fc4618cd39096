import { useEffect, useRef, useState } from 'preact/hooks';

/** A value the page shows, with change notification (the page's only state container). */
export class Store<T> {
  private readonly listeners = new Set<() => void>();
  constructor(private value: T) {}
  get(): T {
    return this.value;
  }
  set(next: T): void {
    this.value = next;
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
