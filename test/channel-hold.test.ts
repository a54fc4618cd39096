/**
 * Channel.hold() on a fake clock (the conformance suite runs it on every transport in real
 * time): a held frame leaves alone exactly when HOLD_MS has passed, not before; the window is
 * the first held frame's, not stretched by later ones; one timer serves a channel's every hold;
 * a frame past HOLD_MAX_BYTES does not wait.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HOLD_MAX_BYTES, HOLD_MS } from '../core/channel/channel.js';
import { memoryChannelPair, type MemoryChannel } from '../core/channel/memory.js';
import type { WireFrame } from '../core/wire/frame.js';

const frame = (i: number) => JSON.stringify({ jsonrpc: '2.0', method: 'n', params: { i } });

/** Everything `to` received so far, after the memory pipe's microtask has run. */
async function received(to: MemoryChannel): Promise<WireFrame[]> {
  await Promise.resolve();
  await Promise.resolve();
  const out: WireFrame[] = [];
  for (let f = to.read(); f !== undefined; f = to.read()) out.push(f);
  return out;
}

describe('Channel.hold on a fake clock', () => {
  let a: MemoryChannel;
  let b: MemoryChannel;
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    [a, b] = memoryChannelPair();
  });
  afterEach(() => {
    a.close();
    vi.useRealTimers();
  });

  it('writes a frame held alone once HOLD_MS has passed, not before', async () => {
    expect(a.hold(frame(1))).toBe(true);
    expect(await received(b)).toEqual([]);
    vi.advanceTimersByTime(HOLD_MS - 1);
    expect(await received(b)).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(await received(b)).toEqual([frame(1)]);
  });

  it('keeps the first held frame’s window: a second hold does not stretch it', async () => {
    a.hold(frame(1));
    vi.advanceTimersByTime(HOLD_MS - 1);
    a.hold(frame(2));
    vi.advanceTimersByTime(1);
    expect(await received(b)).toEqual([frame(1), frame(2)]);
  });

  it('uses one timer for every hold of a channel, re-armed after each release', async () => {
    const timers = vi.spyOn(globalThis, 'setTimeout');
    for (let i = 0; i < 100; i++) {
      a.hold(frame(2 * i));
      if (i % 2)
        a.post(frame(2 * i + 1)); // released by the next frame
      else vi.advanceTimersByTime(HOLD_MS); // released alone
    }
    expect(timers).toHaveBeenCalledTimes(1);
    const got = await received(b);
    expect(got).toHaveLength(150);
    expect(got.map((f) => JSON.parse(f as string).params.i)).toEqual(
      [...got.map((f) => JSON.parse(f as string).params.i)].sort((x, y) => x - y),
    );
  });

  it('does not hold past HOLD_MAX_BYTES: the frame that would pass them leaves at once, after those held', async () => {
    const big = JSON.stringify({ jsonrpc: '2.0', method: 'n', params: { s: 'x'.repeat(HOLD_MAX_BYTES) } });
    a.hold(frame(1));
    a.hold(big);
    expect(await received(b)).toEqual([frame(1), big]);
  });

  it('drops what it holds when the peer goes, and its timer with it', async () => {
    a.hold(frame(1));
    b.close();
    await vi.advanceTimersByTimeAsync(HOLD_MS);
    expect(a.isClosed).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    expect(a.hold(frame(2))).toBe(false);
  });
});
