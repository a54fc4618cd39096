/**
 * The queue behind channel outboxes, inbound frames and a session's items: first in, first
 * out, and `shift()` does not slow down as the queue grows (Array#shift on 200,000 items
 * takes seconds here: it moves every remaining item once the array is in V8's large-object space).
 */
import { describe, expect, it } from 'vitest';
import { Fifo } from '../core/util/fifo.js';

describe('Fifo', () => {
  it('hands items out in order, interleaved with pushes, and empties with takeAll', () => {
    const q = new Fifo<number>();
    expect(q.shift()).toBeUndefined();
    for (let i = 0; i < 3000; i++) q.push(i);
    const out: number[] = [];
    for (let i = 0; i < 2500; i++) out.push(q.shift()!);
    for (let i = 3000; i < 3100; i++) q.push(i);
    expect(q.length).toBe(600);
    expect(q.peek()).toBe(2500); // left in place
    expect(q.length).toBe(600);
    expect(q.shift()).toBe(2500);
    expect(q.takeAll()).toEqual(Array.from({ length: 599 }, (_, i) => 2501 + i));
    expect(out).toEqual(Array.from({ length: 2500 }, (_, i) => i));
    expect(q.length).toBe(0);
    expect(q.shift()).toBeUndefined();
    expect(q.peek()).toBeUndefined();
  });

  it('drains 200,000 items in linear time', () => {
    const q = new Fifo<{ i: number }>();
    for (let i = 0; i < 200_000; i++) q.push({ i });
    const started = performance.now();
    let n = 0;
    while (q.shift()) n++;
    expect(n).toBe(200_000);
    expect(performance.now() - started).toBeLessThan(500); // ~5 ms; Array#shift takes seconds
  });
});
