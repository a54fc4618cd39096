/**
 * The gateway's acks to an agent: a burst of output read in one turn is acknowledged once, at
 * the end of that turn, with the burst's last seq, and only once Durability says the store
 * wrote it, or sooner once 512 KB are unacked; a trickle below the batch size is acknowledged
 * after ACK_AFTER_MS. Inputs go to the engine once they may be shown.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { memoryChannelPair } from '../core/channel/memory.js';
import { silentLogger } from '../core/logging.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { ACK_AFTER_MS, AgentLink } from '../gateway/directory/agent-link.js';
import { ANONYMOUS } from '../gateway/door/principal.js';
import { Durability } from '../gateway/session/session.js';
import { MemorySessionStore, type SessionStore } from '../gateway/session/session-store.js';
import { HeldStore } from './support/held-store.js';
import { waitFor, withTimeout } from './support/wait.js';

const SESSION = 's-acks';

/** An agent link over `store` (default: the memory store, durable at once), and what its agent received. */
function rig(store: SessionStore = new MemorySessionStore()) {
  const [gatewaySide, agentSide] = memoryChannelPair();
  const gateway = new RpcPeer(gatewaySide);
  const agent = new RpcPeer(agentSide);
  const link = new AgentLink(
    { name: 'a', host: 'h', engines: ['claude'], default_engine: 'claude', labels: {}, sessions: [] },
    gateway,
    { get: () => undefined, liveSessionIdsOf: () => [] },
    silentLogger,
    ANONYMOUS,
    new Durability(store),
  );
  const acks: number[] = [];
  const inputs: number[] = [];
  agent.onNotification('agent.input', (p) => void inputs.push(p.seq));
  const firstAck = new Promise<number>((resolve) =>
    agent.onNotification('session.ack', (p) => {
      acks.push(p.seq);
      resolve(p.seq);
    }),
  );
  void gateway.run();
  void agent.run();
  const send = (seq: number, body = Buffer.from('{"type":"assistant"}')) =>
    agent.postBinary('session.output', { session_id: SESSION, seq, meta: { type: 'assistant' } }, body);
  const stop = () => {
    link.dispose();
    gatewaySide.close();
  };
  return { link, send, firstAck, acks, inputs, stop };
}

const bounded = <T>(p: Promise<T>, what: string): Promise<T> => withTimeout(p, 5_000, what);

describe('acks to the agent', () => {
  let stop: (() => void) | undefined;
  afterEach(() => stop?.());

  it('acknowledge a burst once, with its last seq', async () => {
    const r = rig();
    stop = r.stop;
    for (let seq = 1; seq <= 100; seq++) r.send(seq);
    expect(await bounded(r.firstAck, 'the ack of the burst')).toBe(100);
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

  it("an ack waits until the store has written what it covers (the file store's group commit, JetStream's acknowledgement)", async () => {
    const store = new HeldStore();
    const r = rig(store);
    stop = r.stop;
    store.appendFrame(SESSION, { seq: 1, bytes: Buffer.from('{}') }); // what the session appended for this output
    for (let seq = 1; seq <= 100; seq++) r.send(seq);
    await new Promise((resolve) => setTimeout(resolve, ACK_AFTER_MS * 3)); // past the batch and the timer
    expect(r.acks).toEqual([]);
    store.release();
    expect(await bounded(r.firstAck, 'the ack once written')).toBe(100);
  });

  it("an input goes to the engine once it may be shown: after its write, or ahead of it where the store shows ahead (the cluster's, NATS away); its ack still waits", async () => {
    const store = new HeldStore();
    const r = rig(store);
    stop = r.stop;
    const arrived = (n: number, what: string) => waitFor(() => r.inputs.length >= n, 5_000, what);
    store.appendInput(SESSION, { seq: 1, key: 'k1', line: { type: 'user' } });
    r.link.input(SESSION, 1, { type: 'user' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(r.inputs).toEqual([]); // not written yet: not sent
    store.release();
    await arrived(1, 'input 1 once written');
    store.showAhead = true;
    r.send(1);
    store.appendFrame(SESSION, { seq: 1, bytes: Buffer.from('{}') });
    store.appendInput(SESSION, { seq: 2, key: 'k2', line: { type: 'user' } });
    r.link.input(SESSION, 2, { type: 'user' });
    await arrived(2, 'input 2 ahead of its write');
    await new Promise((resolve) => setTimeout(resolve, ACK_AFTER_MS * 3));
    expect(r.acks).toEqual([]); // the output ack waits for the write all the same
    store.release();
    expect(await bounded(r.firstAck, 'the ack once written')).toBe(1);
    expect(r.inputs).toEqual([1, 2]);
  });
});
