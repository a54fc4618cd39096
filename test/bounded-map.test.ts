import { describe, expect, it } from 'vitest';
import { BoundedMap } from '../core/util/bounded-map.js';

const keysOf = (m: BoundedMap<string, number>, all: string[]) => all.filter((k) => m.has(k));

describe('BoundedMap', () => {
  it('forgets the oldest key past its size; setting a present key keeps its place', () => {
    const m = new BoundedMap<string, number>(3);
    m.set('a', 1).set('b', 2).set('c', 3);
    m.set('a', 10); // present: value changes, place kept
    m.set('d', 4);
    expect(keysOf(m, ['a', 'b', 'c', 'd'])).toEqual(['b', 'c', 'd']);
    expect(m.get('b')).toBe(2);
    expect(m.size).toBe(3);
  });

  it('delete then set makes a key the newest, and its old place forgets nothing', () => {
    const m = new BoundedMap<string, number>(3);
    m.set('a', 1).set('b', 2).set('c', 3);
    m.delete('a');
    m.set('a', 5); // newest now
    m.set('d', 4); // b is the oldest
    expect(keysOf(m, ['a', 'b', 'c', 'd'])).toEqual(['a', 'c', 'd']);
    m.set('e', 6); // then c: a's stale first place must not take the new a
    expect(keysOf(m, ['a', 'b', 'c', 'd', 'e'])).toEqual(['a', 'd', 'e']);
    expect(m.get('a')).toBe(5);
  });

  it('keeps its bookkeeping bounded when one key is deleted and set again and again (as a rate limiter does)', () => {
    const m = new BoundedMap<string, number>(50_000);
    for (let n = 0; n < 100_000; n++) {
      m.delete('one address');
      m.set('one address', n);
    }
    expect(m.size).toBe(1);
    expect((m as unknown as { order: { length: number } }).order.length).toBeLessThanOrEqual(2 * m.size + 65);
    expect(m.get('one address')).toBe(99_999);
  });

  it('clear empties it, and a size under 1 is refused', () => {
    const m = new BoundedMap<string, number>(2);
    m.set('a', 1).set('b', 2);
    m.clear();
    expect(m.size).toBe(0);
    m.set('c', 3).set('d', 4).set('e', 5);
    expect(keysOf(m, ['c', 'd', 'e'])).toEqual(['d', 'e']);
    expect(() => new BoundedMap(0)).toThrow(/at least 1/);
  });
});
