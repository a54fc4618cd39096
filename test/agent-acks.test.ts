/**
 * The gateway's acks to an agent: a burst of output read in one turn is acknowledged once, at
 * the end of that turn, with the burst's last seq, and only once the store made it durable
 * (`whenDurable`), or sooner once 512 KB are unacked; a trickle below the batch size is
 * acknowledged after ACK_AFTER_MS.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { memoryChannelPair } from '../core/channel/memory.js';
import { silentLogger } from '../core/logging.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { ACK_AFTER_MS, AgentLink } from '../gateway/directory/agent-link.js';
import { ANONYMOUS } from '../gateway/door/principal.js';
import { withTimeout } from './support/wait.js';

const SESSION = 's-acks';

/** `whenDurable`: the store's wait (default: durable at once, as the file store after its flush). */
function rig(whenDurable?: (send: () => void) => void) {
  const [gatewaySide, agentSide] = memoryChannelPair();
  const gateway = new RpcPeer(gatewaySide);
  const agent = new RpcPeer(agentSide);
  const events: string[] = [];
  const link = new AgentLink(
    { name: 'a', host: 'h', engines: ['claude'], default_engine: 'claude', labels: {}, sessions: [] },
    gateway,
    new Map(),
    silentLogger,
    ANONYMOUS,
    undefined,
    whenDurable ??
      ((send) => {
        events.push('durable');
        send();
      }),
  );
  const acks: number[] = [];
  const firstAck = new Promise<number>((resolve) =>
    agent.onNotification('session.ack', (p) => {
      events.push(`ack ${p.seq}`);
      acks.push(p.seq);
      resolve(p.seq);
    }),
  );
  void gateway.run();
  void agent.run();
  const send = (seq: number, body = Buffer.from('{"type":"assistant"}')) => agent.postBinary('session.output', { session_id: SESSION, seq, meta: { type: 'assistant' } }, body);
  const stop = () => {
    link.dispose();
    gatewaySide.close();
  };
  return { send, firstAck, acks, events, stop };
}

const bounded = <T>(p: Promise<T>, what: string): Promise<T> => withTimeout(p, 5_000, what);

describe('acks to the agent', () => {
  let stop: (() => void) | undefined;
  afterEach(() => stop?.());

  it('acknowledge a burst once, with its last seq, after the store was made durable', async () => {
    const r = rig();
    stop = r.stop;
    for (let seq = 1; seq <= 100; seq++) r.send(seq);
    expect(await bounded(r.firstAck, 'the ack of the burst')).toBe(100);
    expect(r.events.slice(0, 2)).toEqual(['durable', 'ack 100']);
    await new Promise((resolve) => setTimeout(resolve, ACK_AFTER_MS + 50)); // past the delayed ack
    expect(r.acks).toEqual([100]); // once

  });

  it('acknowledge a few large lines at the end of their turn, not after the delay: the agent holds each line until then', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }); // the delayed ack never comes by itself
    try {
      const r = rig();
      stop = r.stop;
      const line = Buffer.from(`{"type":"assistant","text":"${'x'.repeat(300_000)}"}`);
      for (let seq = 1; seq <= 2; seq++) r.send(seq, line); // 2 frames, 600 KB
      expect(await r.firstAck).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('acknowledge a trickle below the batch size after a short delay, not at the end of its turn', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const r = rig();
      stop = r.stop;
      for (let seq = 1; seq <= 3; seq++) r.send(seq);
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve)); // delivered, turns over
      expect(r.acks).toEqual([]);
      await vi.advanceTimersByTimeAsync(ACK_AFTER_MS - 2);
      expect(r.acks).toEqual([]);
      await vi.advanceTimersByTimeAsync(2);
      expect(r.acks).toEqual([3]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('an ack waits for a store that makes output durable later (the cluster\'s, once JetStream acknowledged it)', async () => {
    const pending: (() => void)[] = [];
    const r = rig((send) => pending.push(send));
    stop = r.stop;
    for (let seq = 1; seq <= 100; seq++) r.send(seq);
    await new Promise((resolve) => setTimeout(resolve, 300)); // past the batch and the timer
    expect(r.acks).toEqual([]);
    expect(pending.length).toBeGreaterThan(0);
    for (const send of pending.splice(0)) send();
    expect(await bounded(r.firstAck, 'the ack once durable')).toBe(100);
  });
});
