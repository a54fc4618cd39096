import { useEffect, useState } from 'preact/hooks';

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

/** Re-renders the calling component whenever the store changes. */
export function useStore<T>(store: Store<T>): T {
  const [, bump] = useState(0);
  useEffect(() => store.subscribe(() => bump((n) => n + 1)), [store]);
  return store.get();
}
