import { afterEach, describe, expect, it, vi } from 'vitest';
import { memoryChannelPair } from '../core/channel/memory.js';
import { startHeartbeat } from '../core/link/heartbeat.js';
import { RpcPeer } from '../core/rpc/peer.js';

/**
 * A pinger with a fake clock, pinging every 1 s and waiting 500 ms for an answer. Its peer
 * answers when `answer`, else never reads (a peer that stopped answering without closing).
 * With `backlog`, the pinger's channel reports `backlog.prop` as `backlog.read()` (what the
 * heartbeat looks at), through a stand-in forwarding everything else to the memory channel.
 */
function startPinger(opts: { answer?: boolean; backlog?: { prop: 'bufferedBytes' | 'receivedBytes'; read: () => number } } = {}) {
  vi.useFakeTimers();
  const [real, peerEnd] = memoryChannelPair();
  const { backlog } = opts;
  const channel = backlog
    ? new Proxy(real, { get: (target, key) => (key === backlog.prop ? backlog.read() : Reflect.get(target, key, target)) })
    : real;
  const pinger = new RpcPeer(channel);
  void pinger.run();
  if (opts.answer) void new RpcPeer(peerEnd).onRequest('ping', () => ({})).run();
  const dead = vi.fn();
  startHeartbeat(pinger, { intervalMs: 1_000, timeoutMs: 500 }, dead);
  return { dead, close: () => real.close() };
}

afterEach(() => vi.useRealTimers());

describe('heartbeat', () => {
  it('stays quiet while the peer answers', async () => {
    const { dead, close } = startPinger({ answer: true });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(dead).not.toHaveBeenCalled();
    close();
  });

  it('declares a silent peer dead once, within interval + timeout', async () => {
    const { dead, close } = startPinger();
    await vi.advanceTimersByTimeAsync(1_499);
    expect(dead).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(2);
    expect(dead).toHaveBeenCalledTimes(1);
    expect(dead.mock.calls[0][0]).toContain('did not answer a heartbeat within 500 ms');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(dead).toHaveBeenCalledTimes(1);
    close();
  });

  it('stops when the channel closes', async () => {
    const { dead, close } = startPinger();
    close();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(dead).not.toHaveBeenCalled();
  });
});

describe('heartbeat behind a backlog', () => {
  it('forgives an unanswered ping while the send queue drains, and not when it stalls', async () => {
    let buffered = 1_000_000;
    const { dead, close } = startPinger({ backlog: { prop: 'bufferedBytes', read: () => buffered } });
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
    const { dead, close } = startPinger({ backlog: { prop: 'receivedBytes', read: () => received } });
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
