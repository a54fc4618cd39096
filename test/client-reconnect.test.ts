import { afterEach, describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import type { SessionItem } from '../client/remote-session.js';
import type { LinkStatus } from '../core/link/link.js';
import { startRig, type EngineRig } from './support/engines.js';
import { describe as label, until } from './support/items.js';
import { withTimeout, type TransportName } from './support/stack.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';

/**
 * The library's reconnect: a client whose link is cut mid-turn reconnects by itself, and
 * its async iterable goes on with nothing lost or repeated. The reference is a second
 * client on a link that is never cut, attached to the same session from its first frame.
 */
const TRANSPORTS: TransportName[] = ['ws', 'grpc'];

/** What one item is, for comparing two clients' views (replies are not sequenced). */
const view = (i: SessionItem) =>
  i.kind === 'engine'
    ? { seq: i.seq, origin: i.origin, line: i.line }
    : i.kind === 'event'
      ? { seq: i.seq, event: i.event }
      : { reply: i.line };

const isDelta = (i: SessionItem) => i.kind === 'engine' && i.message.type === 'stream_event';
const isResult = (i: SessionItem) => i.kind === 'engine' && i.origin === 'engine' && i.message.type === 'result';
const isExited = (i: SessionItem) => i.kind === 'event' && i.event.subtype === 'exited';

describe.each(TRANSPORTS)('client reconnect over %s', (transport) => {
  let rig: EngineRig | undefined;
  let proxy: TcpProxy | undefined;
  let cutClient: GatewayClient | undefined;

  afterEach(async () => {
    await cutClient?.close();
    await proxy?.close();
    await rig?.stop();
    cutClient = proxy = rig = undefined;
  });

  /** A demo rig, and a session of a client that reaches it through a proxy the test can cut. */
  const sessionBehindProxy = async () => {
    rig = await startRig('demo', undefined, { clientTransport: transport });
    proxy = await startTcpProxy(rig.stack.url);
    cutClient = await GatewayClient.connect({ gateway: proxy.url, token: rig.stack.token, reconnect: true });
    return { rig, proxy, session: await cutClient.createSession({ agent: 'test-agent' }) };
  };

  it('a link cut mid-turn resumes by itself: the iterable goes on with no frame lost or repeated', async () => {
    rig = await startRig('demo', undefined, { clientTransport: transport });
    proxy = await startTcpProxy(rig.stack.url);
    const token = rig.stack.token;
    let seqAtCut = 0;
    const statuses: LinkStatus['state'][] = [];
    // When the link comes back: how far this client had got, and how far the never-cut client has.
    let atReconnect: { mine: number; session: number } | undefined;
    cutClient = await GatewayClient.connect({
      gateway: proxy.url,
      token,
      reconnect: true,
      onStatus: (s) => {
        statuses.push(s.state);
        if (s.state === 'connected' && statuses.includes('down')) atReconnect ??= { mine: seqAtCut, session: lastRefSeq() };
      },
    });
    const session = await cutClient.createSession({ agent: 'test-agent', options: { include_partial_messages: true } });

    // The reference: another client, never cut, attached from the session's first frame.
    const watcher = await rig.stack.client();
    const reference = await watcher.attach(session.id, { fromSeq: 1 });
    const refItems: SessionItem[] = [];
    const lastRefSeq = () => Math.max(0, ...refItems.map((i) => (i.kind === 'reply' ? 0 : i.seq)));
    const refDone = until(reference[Symbol.asyncIterator](), isExited, refItems, 30_000, 'the reference to see the exit');

    const items: SessionItem[] = [];
    const it = session[Symbol.asyncIterator]();
    await session.sendUserMessage('a slow long answer');
    // A few deltas in, the network drops (and stays down a moment): the turn goes on without us.
    for (let n = 0; n < 5; n++) await until(it, isDelta, items, 10_000, `delta ${n + 1}`);
    seqAtCut = session.lastSeq;
    proxy.cut(700);
    await until(it, isResult, items, 20_000, 'the result after the reconnect');
    expect(statuses).toContain('down');
    expect(statuses.filter((s) => s === 'connected').length).toBeGreaterThanOrEqual(2);
    expect(proxy.connections).toBeGreaterThanOrEqual(2);
    // Frames went by while the link was down: those came back through the resume.
    expect(atReconnect!.session).toBeGreaterThan(atReconnect!.mine);

    // Requests work on the new link too; the engine exits and both views end there.
    await withTimeout(session.stop(), 15_000, 'session.stop');
    await until(it, isExited, items, 15_000, 'the exit');
    expect(await it.next()).toMatchObject({ done: true });
    await refDone;

    const seqs = items.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);
    expect(new Set(seqs).size, 'no seq twice').toBe(seqs.length);
    expect(seqs, 'consecutive from 1').toEqual(Array.from({ length: seqs.length }, (_, k) => k + 1));
    expect(seqs.at(-1)).toBeGreaterThan(seqAtCut + 20); // most of the turn came after the cut
    expect(items.filter((i) => i.kind !== 'reply').map(view)).toEqual(refItems.map(view));
    expect(items.filter(isDelta).length).toBeGreaterThanOrEqual(40);
    expect(items.map(label)).toContain('engine:result/success');
  }, 60_000);

  it('input sent as the link drops goes out once the link is back, and only once', async () => {
    const { session, proxy } = await sessionBehindProxy();
    const it = session[Symbol.asyncIterator]();
    proxy.cut(700);
    const sent = session.sendUserMessage('hello'); // retried with the same input id until acknowledged
    const items: SessionItem[] = [];
    await until(it, isResult, items, 20_000, 'the result');
    expect(['applied', 'duplicate']).toContain(await withTimeout(sent, 10_000, 'the send'));
    await withTimeout(session.stop(), 15_000, 'session.stop');
    await until(it, isExited, items, 15_000, 'the exit');
    expect(items.filter((i) => i.kind === 'event' && i.event.subtype === 'prompt')).toHaveLength(1);
    expect(items.filter(isResult)).toHaveLength(1);
    expect(proxy.connections).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it('a control request in flight when the link drops still gets its answer, and only its asker does', async () => {
    const { session, proxy, rig } = await sessionBehindProxy();
    const watcher = await (await rig.stack.client()).attach(session.id);
    const seenByWatcher: SessionItem[] = [];
    const wi = watcher[Symbol.asyncIterator]();
    const it = session[Symbol.asyncIterator]();
    // The request goes out, then the link drops before (or while) the answer comes back.
    const answered = session.request('get_binary_version');
    proxy.cut(700);
    const reply = await withTimeout(answered, 15_000, 'the reply across the reconnect');
    expect((reply.response as { response?: { version?: string } }).response?.version).toBeTypeOf('string');
    await session.sendUserMessage('still here');
    await until(it, isResult, [], 20_000, 'a turn after the reconnect');
    await until(wi, isResult, seenByWatcher, 20_000, 'the watcher seeing that turn');
    expect(seenByWatcher.some((i) => i.kind === 'reply' || (i.kind === 'engine' && i.message.type === 'control_response'))).toBe(false);
  }, 60_000);
});
