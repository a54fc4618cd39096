/**
 * One reader waiting for "something changed" (a pull queue's consumer): wait() resolves at
 * the next wake(). A wake() with nobody waiting is dropped, so the reader checks its state
 * before it waits again, never after.
 */
export class Wakeup {
  private waiter: (() => void) | undefined;

  /** Resolves at the next wake(). One reader at a time. */
  wait(): Promise<void> {
    return new Promise((resolve) => (this.waiter = resolve));
  }

  /** Wakes the reader, if one is waiting. */
  wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
}
