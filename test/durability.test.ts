/**
 * Durability: the one answer to "may I ack this to the agent" and "may I show this frame":
 * with the memory store at once; with a store that writes, only once the write is confirmed;
 * with the cluster's store while NATS is away, shown ahead but never acked ahead. Checked
 * through a session's history (its durable outbox hands frames to members) over a store the
 * test holds and releases, and over the real file store's group commit. (The JetStream store
 * is checked in cluster-store.test.ts; the agent link's acks in agent-acks.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { frameBuffer, type FrameBytes } from '../core/wire/session-frame.js';
import { tetherEvent } from '../core/protocol/events.js';
import { Durability, REPLAY_DEFAULTS } from '../gateway/session/session.js';
import { SessionHistory } from '../gateway/session/history/session-history.js';
import { FileSessionStore, MemorySessionStore, type SessionStore } from '../gateway/session/session-store.js';
import { HeldStore } from './support/held-store.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { withTimeout } from './support/wait.js';

const SESSION = 'sess-d';

/** A history over `store`, the seqs it handed to members, and a way to replay it to a newcomer. */
function historyOver(store: SessionStore) {
  const shown: number[] = [];
  const seqOf = (bytes: FrameBytes) => (JSON.parse(frameBuffer(bytes).toString('utf8')) as { params: { seq: number } }).params.seq;
  const history = new SessionHistory(SESSION, store, new Durability(store), REPLAY_DEFAULTS, (bytes) => shown.push(seqOf(bytes)));
  const append = (n: number) => {
    for (let i = 0; i < n; i++) history.append({ event: tetherEvent({ subtype: 'state', state: 'running' }) });
  };
  const replayed = () => {
    const seqs: number[] = [];
    history.replayTo((bytes) => seqs.push(seqOf(bytes)), 1);
    return seqs;
  };
  return { shown, append, replayed };
}

/** The order in which `durability` answered the calls made by `ask`. */
function answers(durability: Durability, ask: (d: Durability, note: (what: string) => () => void) => void): string[] {
  const order: string[] = [];
  ask(durability, (what) => () => order.push(what));
  return order;
}

describe('durability', () => {
  const cleanups = cleanupsPerTest();

  it('with the memory store (nothing kept), acks and frames go at once', () => {
    const store = new MemorySessionStore();
    expect(answers(new Durability(store), (d, note) => (d.mayAck(note('ack')), d.mayShow(note('show'))))).toEqual(['ack', 'show']);
    const h = historyOver(store);
    h.append(2);
    expect(h.shown).toEqual([1, 2]);
  });

  it('with a store that writes, nothing is acked or shown before the write is confirmed; then everything, in the order asked, each once', () => {
    const store = new HeldStore();
    const durability = new Durability(store);
    const h = historyOver(store);
    h.append(3);
    const order: string[] = [];
    durability.mayAck(() => order.push('ack'));
    durability.mayShow(() => order.push('show'));
    durability.mayAck(() => order.push('ack again'));
    expect(order).toEqual([]);
    expect(h.shown).toEqual([]); // no member saw a frame a crash could still lose
    expect(h.replayed()).toEqual([]); // nor does a member attaching now
    store.release();
    expect(h.shown).toEqual([1, 2, 3]);
    expect(order).toEqual(['ack', 'show', 'ack again']);
    expect(h.replayed()).toEqual([1, 2, 3]);
    store.release();
    expect(h.shown).toEqual([1, 2, 3]); // once
  });

  it('a question covers only what was appended before it: frames appended later wait for their own write', () => {
    const store = new HeldStore();
    const h = historyOver(store);
    h.append(1);
    store.release();
    h.append(2);
    expect(h.shown).toEqual([1]);
    expect(answers(new Durability(store), (d, note) => d.mayAck(note('ack')))).toEqual([]);
    store.release();
    expect(h.shown).toEqual([1, 2, 3]);
  });

  it("where the store shows ahead (the cluster's while NATS is away), frames are shown before the write but the agent is still not acked", () => {
    const store = new HeldStore();
    store.showAhead = true;
    const durability = new Durability(store);
    const h = historyOver(store);
    h.append(2);
    expect(h.shown).toEqual([1, 2]);
    let acked = false;
    durability.mayAck(() => (acked = true));
    expect(acked).toBe(false);
    store.release();
    expect(acked).toBe(true);
  });

  it('with the file store, frames of one turn are shown and acked once its group commit has written them to the log', async () => {
    const dir = cleanups.tempDir('tether-durability-');
    const store = new FileSessionStore(dir.path);
    cleanups.push(() => store.close());
    store.create({ id: SESSION, agent: 'a', engine: 'demo', owner: 'alice', options: {}, created_at: new Date().toISOString() });
    const h = historyOver(store);
    h.append(3);
    expect(h.shown).toEqual([]); // held for the group commit of this turn
    const logged = () =>
      readFileSync(join(dir.path, SESSION, 'log.ndjson'), 'utf8')
        .split('\n')
        .filter(Boolean).length;
    const atAck = await withTimeout(
      new Promise<number>((resolve) => new Durability(store).mayAck(() => resolve(logged()))),
      5_000,
      'the ack',
    );
    expect(atAck).toBe(3); // all three were in the log when the ack was allowed
    expect(h.shown).toEqual([1, 2, 3]);
  });
});
