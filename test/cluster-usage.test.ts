/**
 * Issue 35 in a cluster, on a real nats-server with JetStream: the usage ledger is the fleet's.
 * A turn booked by one gateway's ledger reaches another's; a gateway starting again reads the
 * stream from its start and keeps each turn once; a message no gateway sealed is dropped, logged.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { generateTokenKey } from '../core/auth/keygen.js';
import { silentLogger } from '../core/logging.js';
import { natsDialOf } from '../gateway/cluster/nats-auth.js';
import { NatsLink } from '../gateway/cluster/nats-link.js';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { FabricMac, MAC_HEADER } from '../gateway/cluster/fabric-mac.js';
import { USAGE_STREAM, UsageStream } from '../gateway/cluster/usage-stream.js';
import { ANONYMOUS } from '../gateway/door/principal.js';
import { UsageLedger } from '../gateway/usage/usage-ledger.js';
import { startNatsServer, type NatsServer } from './support/nats-server.js';
import { hasTool } from './support/tools.js';
import { waitFor } from './support/wait.js';

const MAC = FabricMac.fromTokenKey(generateTokenKey('HS256').key);
const ADMIN = { ...ANONYMOUS, sub: 'auditor', canAdmin: true };
/** A `result` line as the engine writes it. */
const result = (uuid: string, index: number, total: number, input: number) =>
  Buffer.from(
    JSON.stringify({ type: 'result', uuid, result_index: index, total_cost_usd: total, usage: { input_tokens: input, output_tokens: 10 } }),
  );

describe.skipIf(!hasTool('nats-server'))("the cluster's usage stream", () => {
  let nats: NatsServer;
  const links: NatsLink[] = [];
  const streams: UsageStream[] = [];
  const link = async () => {
    const l = await NatsLink.open(natsDialOf({ cluster: nats.authUrl, clusterInsecureNoAuth: false }), 'test', silentLogger);
    links.push(l);
    return l;
  };
  /** A gateway's ledger made the fleet's, as Cluster.shareUsage does. */
  const gatewayLedger = async (gatewayId: string, log = silentLogger, maxWaiting?: number) => {
    const ledger = new UsageLedger();
    streams.push(await UsageStream.share(await link(), MAC, ledger, { gatewayId, retentionDays: 90, log, maxWaiting }));
    return ledger;
  };
  beforeEach(async () => {
    nats = await startNatsServer();
  });
  afterEach(async () => {
    for (const s of streams.splice(0)) s.close();
    for (const l of links.splice(0)) await l.close();
    await nats.stop();
  });

  it("a turn booked on gateway B is read on A with its author and sums; a restarted A reads the stream again and doubles nothing; B's own turn is kept once", async () => {
    const a = await gatewayLedger('gw-a');
    const b = await gatewayLedger('gw-b');
    b.book(result('u1', 0, 0.5, 1000), { sessionId: 's1', agent: 'builder', principal: 'alice', owner: 'alice' });
    b.book(result('u2', 1, 0.75, 2000), { sessionId: 's1', agent: 'builder', principal: 'bob', owner: 'alice' });
    a.book(result('u3', 0, 0.1, 300), { sessionId: 's2', agent: 'other', principal: 'alice', owner: 'alice' });
    const rows = (l: UsageLedger) =>
      l.read(ADMIN, { by: 'principal' }).rows.map((r) => [r.key, r.turns, r.input_tokens, Math.round(r.cost_usd * 100)]);
    const expected = [
      ['alice', 2, 1300, 60],
      ['bob', 1, 2000, 25],
    ];
    await waitFor(() => a.read(ADMIN, {}).total.turns === 3 && b.read(ADMIN, {}).total.turns === 3, 10_000, 'both ledgers to hold 3 turns');
    expect(rows(a)).toEqual(expected);
    expect(rows(b)).toEqual(expected);
    expect(a.sessionCost('s1')).toBeCloseTo(0.75, 9);

    const again = await gatewayLedger('gw-a'); // a restart: read from the stream's start, before it returns
    expect(rows(again)).toEqual(expected);
    await new Promise((r) => setTimeout(r, 300)); // nothing more arrives
    expect(again.read(ADMIN, {}).total.turns).toBe(3);
    expect(b.read(ADMIN, {}).total.turns).toBe(3);
  });

  it('a turn booked while NATS is away is published once it is back, and the other ledger, whose consumer was made again, reads it', async () => {
    const a = await gatewayLedger('gw-a');
    const b = await gatewayLedger('gw-b');
    b.book(result('u1', 0, 0.5, 1000), { sessionId: 's1', agent: 'builder', principal: 'alice', owner: 'alice' });
    await waitFor(() => a.read(ADMIN, {}).total.turns === 1, 10_000, 'the first turn');
    await nats.halt();
    await waitFor(() => !links.some((l) => l.isUp), 10_000, 'the links to notice');
    b.book(result('u2', 1, 0.75, 2000), { sessionId: 's1', agent: 'builder', principal: 'bob', owner: 'alice' });
    await nats.restart();
    await waitFor(() => a.read(ADMIN, {}).total.turns === 2, 20_000, 'the turn booked during the outage');
    expect(a.read(ADMIN, {}).rows.map((r) => [r.key, r.input_tokens])).toEqual([
      ['alice', 1000],
      ['bob', 2000],
    ]);
    expect(b.read(ADMIN, {}).total.turns).toBe(2);
  });

  it('while NATS is away at most maxWaiting turns wait; one past it stays on its gateway only, and the log says so', async () => {
    const warned: string[] = [];
    const log = { ...silentLogger, warn: (_o: unknown, msg: string) => void warned.push(msg) } as unknown as typeof silentLogger;
    const a = await gatewayLedger('gw-a');
    const b = await gatewayLedger('gw-b', log, 1);
    await nats.halt();
    await waitFor(() => !links.some((l) => l.isUp), 10_000, 'the links to notice');
    b.book(result('v1', 0, 0.5, 1000), { sessionId: 's2', agent: 'builder', principal: 'alice', owner: 'alice' });
    b.book(result('v2', 1, 0.75, 2000), { sessionId: 's2', agent: 'builder', principal: 'bob', owner: 'alice' });
    expect(warned).toContain('the usage stream is unreachable and its queue is full: turns booked now stay on this gateway');
    await nats.restart();
    await waitFor(() => a.read(ADMIN, {}).total.turns === 1, 20_000, 'the turn that waited');
    expect(a.read(ADMIN, {}).rows.map((r) => r.key)).toEqual(['alice']);
    expect(b.read(ADMIN, {}).total.turns).toBe(2); // the one left out is still b's
  });

  it('a message no gateway sealed (or sealed but not a turn) is dropped and logged; the sealed ones still count', async () => {
    const logged: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) });
    const a = await gatewayLedger('gw-a', log);
    const forger = await link();
    const forged = { time: new Date().toISOString(), session_id: 'sx', agent: 'x', principal: 'mallory', owner: 'mallory' };
    await forger.nc.request('tether.usage.gw-evil', Buffer.from(JSON.stringify(forged)), { timeout: 5_000 }); // JetStream acks it: it is in the stream
    const notATurn = Buffer.from('{"type":"not a turn"}');
    const h = natsHeaders();
    h.set(MAC_HEADER, MAC.sealRecord('tether.usage.gw-b', notATurn, false));
    await forger.nc.request('tether.usage.gw-b', notATurn, { headers: h, timeout: 5_000 });
    const b = await gatewayLedger('gw-b');
    b.book(result('u9', 0, 0.2, 100), { sessionId: 's9', agent: 'builder', principal: 'alice', owner: 'alice' });
    await waitFor(() => a.read(ADMIN, {}).total.turns === 1, 10_000, 'the sealed turn');
    expect(a.read(ADMIN, {}).rows.map((r) => r.key)).toEqual(['alice']);
    expect(b.read(ADMIN, {}).rows.map((r) => r.key)).toEqual(['alice']);
    expect(logged.join('')).toContain('dropping a usage message no gateway wrote');
    const { jetstreamManager } = await import('@nats-io/jetstream');
    expect((await (await jetstreamManager(forger.nc)).streams.info(USAGE_STREAM)).state.messages).toBe(3);
  });
});
