import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../core/logging.js';
import { encodeLineFrame, frameBuffer } from '../core/wire/session-frame.js';
import { JetStreamSessionStore } from '../gateway/cluster/jetstream-store.js';
import { Durability } from '../gateway/session/session.js';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { CONTINUATION_HEADER, LogReader } from '../gateway/cluster/session-log.js';
import { MAC_HEADER } from '../gateway/cluster/fabric-mac.js';
import { SessionMirror } from '../gateway/cluster/session-mirror.js';
import { REPLAY_DEFAULTS } from '../gateway/session/history/replay-log.js';
import { frameRecord } from '../gateway/session/session-store.js';
import { NatsLink } from '../gateway/cluster/nats-link.js';
import { natsDialOf } from '../gateway/cluster/nats-auth.js';
import { FabricMac } from '../gateway/cluster/fabric-mac.js';
import { generateTokenKey } from '../core/auth/keygen.js';
import { ClusterRegistry } from '../gateway/cluster/registry.js';
import type { SessionRecord } from '../gateway/session/session-store.js';
import { startNatsServer, type NatsServer } from './support/nats-server.js';
import { waitFor, withTimeout } from './support/wait.js';
import { hasTool } from './support/tools.js';

const record = (id: string): SessionRecord => ({
  id,
  agent: 'builder',
  engine: 'claude',
  owner: 'alice',
  options: {},
  created_at: new Date().toISOString(),
});
const frame = (id: string, seq: number, text: string) => ({
  seq,
  agentSeq: seq,
  bytes: encodeLineFrame(id, seq, 'engine', Buffer.from(JSON.stringify({ type: 'assistant', text }))),
});
/** The fabric's MAC key, as a gateway derives it from its token key. */
const MAC = FabricMac.fromTokenKey(generateTokenKey('HS256').key);
const flushed = (store: JetStreamSessionStore) => new Promise<void>((resolve) => store.whenWritten(resolve));

/** Waits (bounded) for `cond`. */
const until = (cond: () => boolean, what: string, ms = 10_000) => waitFor(cond, ms, what);

/** The cluster's session store on a real nats-server with JetStream. */
describe.skipIf(!hasTool('nats-server'))('the JetStream session store', () => {
  let nats: NatsServer;
  let link: NatsLink;
  let store: JetStreamSessionStore;
  beforeEach(async () => {
    nats = await startNatsServer();
    link = await NatsLink.open(natsDialOf({ cluster: nats.authUrl, clusterInsecureNoAuth: false }), 'test', silentLogger);
    store = await JetStreamSessionStore.open(link, await ClusterRegistry.open(link.nc, MAC, silentLogger), silentLogger, MAC);
    store.home = 'gw-test';
  });
  afterEach(async () => {
    store.close();
    await link.close();
    await nats.stop();
  });

  it('reads back frames and inputs in order, a 1.5 MiB frame split over messages and joined again', async () => {
    store.create(record('s1'));
    const big = 'x'.repeat(1536 * 1024);
    for (let seq = 1; seq <= 2000; seq++) {
      store.appendFrame('s1', frame('s1', seq, seq === 1000 ? big : `line ${seq}`));
      if (seq % 500 === 0) store.appendInput('s1', { seq: seq / 500, key: `alice\u0000in-${seq}`, line: { type: 'user', n: seq } });
    }
    store.appendFrame('s2', frame('s2', 1, 'another session'));
    await flushed(store);
    expect(store.unpublishedBytes).toBe(0);
    const back = (await store.load('s1'))!;
    expect(back.record.owner).toBe('alice');
    expect(back.frames.map((f) => f.seq)).toEqual(Array.from({ length: 2000 }, (_, n) => n + 1));
    expect(frameBuffer(back.frames[999].bytes).toString()).toContain(big);
    expect(frameBuffer(back.frames[1].bytes).equals(frameBuffer(frame('s1', 2, 'line 2').bytes))).toBe(true);
    expect(back.inputs.map((i) => [i.seq, i.key])).toEqual([1, 2, 3, 4].map((n) => [n, `alice\u0000in-${n * 500}`]));
    expect(await store.load('s2')).toBeUndefined(); // no record was created for it
  });

  it('Durability over it: an ack waits for JetStream (not while NATS is down, at once after it is back) while frames may still be shown meanwhile; nothing lost, registry writes included', async () => {
    const durability = new Durability(store);
    store.create(record('s1'));
    store.appendFrame('s1', frame('s1', 1, 'before'));
    await flushed(store);
    await nats.halt();
    await until(() => !link.isUp, 'the link to notice');
    store.appendFrame('s1', frame('s1', 2, 'during the outage'));
    store.create(record('s3')); // a session created meanwhile reaches the registry once NATS is back
    store.saveRoles('s3', { bob: 'viewer' });
    let durable = false;
    let shareable = false;
    durability.mayAck(() => (durable = true));
    durability.mayShow(() => (shareable = true));
    expect(shareable).toBe(true); // the gateway keeps serving its own clients
    await new Promise((r) => setTimeout(r, 500));
    expect(durable).toBe(false); // the agent is not acked
    expect(store.unpublishedBytes).toBeGreaterThan(0);
    await nats.restart();
    await until(() => durable, 'the held frame to reach JetStream', 15_000);
    expect((await store.load('s1'))!.frames.map((f) => f.seq)).toEqual([1, 2]);
    expect((await store.load('s3'))?.roles).toEqual({ bob: 'viewer' });
  });

  it('a mirror on another gateway told of frames missing from the log gives its clients a gap notice and goes on', async () => {
    store.create(record('s1'));
    for (const seq of [1, 2, 5, 6]) store.appendFrame('s1', frame('s1', seq, `line ${seq}`)); // 3 and 4 never reached the log
    await flushed(store);
    const mirror = new SessionMirror(link, 's1', REPLAY_DEFAULTS, silentLogger, MAC);
    const seen: string[] = [];
    const member = {
      clientId: 'c1',
      principal: 'bob',
      transport: 'test',
      sendFrame: (b: Buffer) => seen.push(b.toString()),
      sendReply: () => {},
    };
    try {
      await mirror.attach(member, 1); // caught up: 1, 2 then the skip to 5 are read before it returns
      store.appendFrame('s1', frame('s1', 7, 'line 7'));
      store.appendFrame('s1', frame('s1', 10, 'line 10')); // 8 and 9 missing while a client watches
      await until(() => seen.length === 6, 'the mirror to hand on frames up to 10');
      const seqOf = (f: string) => (JSON.parse(f) as { params: { seq: number } }).params.seq;
      expect(seen.map(seqOf)).toEqual([0, 5, 6, 7, 0, 10]);
      expect(seen[0]).toMatch(/"subtype":"gap".*"from_seq":1,"to_seq":4/);
      expect(seen[4]).toMatch(/"subtype":"gap".*"from_seq":8,"to_seq":9/);
      const late: string[] = [];
      await mirror.attach({ ...member, clientId: 'c2', sendFrame: (b: Buffer) => late.push(b.toString()) }, 9);
      expect(late.map(seqOf)).toEqual([0, 10]); // the history here restarted at 10
    } finally {
      mirror.close();
    }
  });

  it('a registry write that fails with NATS up (over its max payload) is given up after a few tries, not retried forever holding every ack', async () => {
    store.create({ ...record('huge'), options: { system_prompt: 'x'.repeat(2 * 1024 * 1024) } }); // over nats-server's 1 MB max_payload
    store.appendFrame('s1', frame('s1', 1, 'another session, acked meanwhile'));
    await withTimeout(flushed(store), 10_000, 'whenWritten past the failing registry write');
    expect(store.unpublishedBytes).toBe(0);
    expect(await store.load('huge')).toBeUndefined();
  });

  it('drop removes the session log and its registry entry', async () => {
    store.create(record('s1'));
    store.appendFrame('s1', frame('s1', 1, 'x'));
    await flushed(store);
    store.drop('s1');
    await flushed(store);
    expect(await store.load('s1')).toBeUndefined();
  });
});

describe.skipIf(!hasTool('nats-server'))('reading a session log back', () => {
  /** A log message as a gateway publishes it: sealed, marked when it continues a record. */
  const sealed = (data: Buffer, cont: boolean) => {
    const h = natsHeaders();
    if (cont) h.set(CONTINUATION_HEADER, '1');
    h.set(MAC_HEADER, MAC.sealRecord('tether.s.s', data, cont));
    return { subject: 'tether.s.s', data, headers: h };
  };
  const check = { mac: MAC, log: silentLogger };

  it('joins a record split over messages, and skips the tail of one whose start aged out of the stream', () => {
    const seqs: number[] = [];
    const reader = new LogReader(check, (r) => 'frame' in r && seqs.push(r.frame.seq));
    const one = frameRecord(frame('s', 7, 'x'.repeat(100)));
    const two = frameRecord(frame('s', 8, 'y'));
    reader.push(sealed(one.subarray(40), true)); // the tail of frame 7: its first part is gone
    reader.push(sealed(Buffer.concat([two.subarray(0, 10)]), false));
    reader.push(sealed(two.subarray(10), true));
    expect(seqs).toEqual([8]);
    const whole = new LogReader(check, (r) => 'frame' in r && seqs.push(r.frame.seq));
    whole.push(sealed(one.subarray(0, 30), false));
    whole.push(sealed(one.subarray(30), true));
    expect(seqs).toEqual([8, 7]);
  });

  it('drops a message no gateway sealed: unsigned, signed under another key, or moved to another subject', () => {
    const seqs: number[] = [];
    const reader = new LogReader(check, (r) => 'frame' in r && seqs.push(r.frame.seq));
    const other = FabricMac.fromTokenKey(generateTokenKey('HS256').key);
    const forged = (n: number) => frameRecord(frame('s', n, 'forged'));
    reader.push({ subject: 'tether.s.s', data: forged(1) });
    const h = natsHeaders();
    h.set(MAC_HEADER, other.sealRecord('tether.s.s', forged(2), false));
    reader.push({ subject: 'tether.s.s', data: forged(2), headers: h });
    reader.push({ ...sealed(forged(3), false), subject: 'tether.s.t' });
    reader.push(sealed(frameRecord(frame('s', 4, 'real')), false));
    expect(seqs).toEqual([4]);
  });
});
