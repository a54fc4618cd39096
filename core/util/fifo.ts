/**
 * A first-in, first-out queue whose `shift()` costs the same however long the queue is.
 * `Array.prototype.shift` moves every remaining element once the array's storage is large
 * (V8 cannot trim arrays kept in its large-object space, from about 16,000 elements), so a
 * queue that grows under load turned quadratic exactly then.
 */
export class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  /** The oldest item, left in place; undefined when empty. */
  peek(): T | undefined {
    return this.head < this.items.length ? this.items[this.head] : undefined;
  }

  /** The oldest item, removed; undefined when empty. */
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined; // not kept alive by the queue
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head); // compacted once the dead half is large: amortized O(1)
      this.head = 0;
    }
    return item;
  }

  /** Removes and returns every item, oldest first. */
  takeAll(): T[] {
    const all = this.items.slice(this.head) as T[];
    this.items = [];
    this.head = 0;
    return all;
  }
}
