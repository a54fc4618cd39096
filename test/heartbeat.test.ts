import { afterEach, describe, expect, it, vi } from 'vitest';
import { memoryChannelPair } from '../core/channel/memory.js';
import { startHeartbeat } from '../core/link/heartbeat.js';
import { RpcPeer } from '../core/rpc/peer.js';

/** The heartbeat with a fake clock: a silent peer is declared dead within interval + timeout. */
describe('heartbeat', () => {
  afterEach(() => vi.useRealTimers());

  function pair(answer: boolean) {
    const [a, b] = memoryChannelPair();
    const pinger = new RpcPeer(a);
    void pinger.run();
    if (answer) {
      const responder = new RpcPeer(b).onRequest('ping', () => ({}));
      void responder.run();
    } // else: b never reads, like a peer that stopped answering without closing
    return { pinger, a, b };
  }

  it('stays quiet while the peer answers', async () => {
    vi.useFakeTimers();
    const { pinger, a } = pair(true);
    const dead = vi.fn();
    startHeartbeat(pinger, { intervalMs: 1_000, timeoutMs: 500 }, dead);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(dead).not.toHaveBeenCalled();
    a.close();
  });

  it('declares a silent peer dead once, within interval + timeout', async () => {
    vi.useFakeTimers();
    const { pinger, a } = pair(false);
    const dead = vi.fn();
    startHeartbeat(pinger, { intervalMs: 1_000, timeoutMs: 500 }, dead);
    await vi.advanceTimersByTimeAsync(1_499);
    expect(dead).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(2);
    expect(dead).toHaveBeenCalledTimes(1);
    expect(dead.mock.calls[0][0]).toContain('did not answer a heartbeat within 500 ms');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(dead).toHaveBeenCalledTimes(1);
    a.close();
  });

  it('stops when the channel closes', async () => {
    vi.useFakeTimers();
    const { pinger, a } = pair(false);
    const dead = vi.fn();
    startHeartbeat(pinger, { intervalMs: 1_000, timeoutMs: 500 }, dead);
    a.close();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(dead).not.toHaveBeenCalled();
  });
});

/**
 * A pinger over a channel that reports `prop` as `read()` (the backlog the heartbeat looks
 * at), through a stand-in that forwards everything else to a real memory channel, with a fake
 * clock. The heartbeat pings every 1 s and waits 500 ms for an answer; nobody answers.
 */
function pingerWithBacklog(prop: 'bufferedBytes' | 'receivedBytes', read: () => number) {
  vi.useFakeTimers();
  const [real] = memoryChannelPair();
  const channel = new Proxy(real, { get: (target, key) => (key === prop ? read() : Reflect.get(target, key, target)) });
  const pinger = new RpcPeer(channel);
  void pinger.run();
  const dead = vi.fn();
  startHeartbeat(pinger, { intervalMs: 1_000, timeoutMs: 500 }, dead);
  return { dead, close: () => real.close() };
}

describe('heartbeat behind a backlog', () => {
  afterEach(() => vi.useRealTimers());

  it('forgives an unanswered ping while the send queue drains, and not when it stalls', async () => {
    let buffered = 1_000_000;
    const { dead, close } = pingerWithBacklog('bufferedBytes', () => buffered);
    for (let i = 0; i < 5; i++) {
      buffered -= 100_000; // the peer reads: our queue shrinks
      await vi.advanceTimersByTimeAsync(1_000);
    }
    expect(dead).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(3_000); // stalled: no progress any more
    expect(dead).toHaveBeenCalledTimes(1);
    close();
  });

  it('forgives a late answer while the peer’s bytes keep arriving, and declares it dead once they stop', async () => {
    let received = 0;
    const { dead, close } = pingerWithBacklog('receivedBytes', () => received);
    for (let i = 0; i < 8; i++) {
      received += 32 * 1024; // a big frame trickles in: our answer waits behind it
      await vi.advanceTimersByTimeAsync(250);
    }
    expect(dead).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1_500); // silent now: found within interval + timeout
    expect(dead).toHaveBeenCalledTimes(1);
    expect(dead.mock.calls[0][0]).toContain('did not answer a heartbeat within 500 ms');
    close();
  });
});
