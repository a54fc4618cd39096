/** The agent's deferred input acks (capability acks.folded.v1): folded into output, or alone after a bound. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeferredInputAcks, INPUT_ACK_DEFER_MS } from '../agent/input-acks.js';

/** Deferred acks on fake timers, recording what goes alone. */
function recorded(): { acks: DeferredInputAcks; alone: [string, number][] } {
  vi.useFakeTimers();
  const alone: [string, number][] = [];
  return { acks: new DeferredInputAcks((s, seq) => alone.push([s, seq])), alone };
}

describe('DeferredInputAcks', () => {
  afterEach(() => vi.useRealTimers());

  it("an ack taken by the session's next output never goes alone; only the highest seq is kept", () => {
    const { acks, alone } = recorded();
    acks.note('a', 1);
    acks.note('a', 3);
    acks.note('a', 2); // cumulative: a lower seq never lowers what is owed
    expect(acks.take('b')).toBeUndefined();
    expect(acks.take('a')).toBe(3);
    expect(acks.take('a')).toBeUndefined();
    vi.advanceTimersByTime(INPUT_ACK_DEFER_MS * 2);
    expect(alone).toEqual([]);
  });

  it('an ack with no output to ride on goes alone after the bound, once per session', () => {
    const { acks, alone } = recorded();
    acks.note('a', 4);
    acks.note('b', 1);
    vi.advanceTimersByTime(INPUT_ACK_DEFER_MS - 1);
    expect(alone).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(alone).toEqual([
      ['a', 4],
      ['b', 1],
    ]);
    acks.note('a', 5); // a new one arms the timer again
    vi.advanceTimersByTime(INPUT_ACK_DEFER_MS);
    expect(alone.at(-1)).toEqual(['a', 5]);
  });

  it('after the link is gone nothing is sent (the next hello carries the last input written)', () => {
    const { acks, alone } = recorded();
    acks.note('a', 1);
    acks.dispose();
    vi.advanceTimersByTime(INPUT_ACK_DEFER_MS * 2);
    expect(alone).toEqual([]);
  });
});
