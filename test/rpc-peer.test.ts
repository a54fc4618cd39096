import { afterEach, describe, expect, it } from 'vitest';
import type { WireFrame } from '../core/wire/frame.js';
import { memoryChannelPair, type MemoryChannel } from '../core/channel/memory.js';
import type { TetherError } from '../core/errors.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { Gateway } from '../gateway/gateway.js';
import { textFrame } from './support/channel-read.js';
import { withTimeout } from './support/stack.js';

/** Reads the next frame a raw channel receives, parsed. */
async function next(it: AsyncIterator<WireFrame>): Promise<Record<string, any>> {
  const r = await withTimeout(it.next(), 2_000, 'a frame');
  if (r.done) throw new Error('channel ended');
  return JSON.parse(textFrame(r.value));
}

describe('JSON-RPC peer and the gateway door, against bad input', () => {
  let gateway: Gateway | undefined;
  let raw: MemoryChannel | undefined;
  afterEach(async () => {
    raw?.close();
    await gateway?.close();
  });

  function connect() {
    gateway = new Gateway({ limits: { helloTimeoutMs: 500 } });
    const [a, b] = memoryChannelPair();
    gateway.accept(b);
    raw = a;
    return { send: (x: unknown) => a.send(typeof x === 'string' ? x : JSON.stringify(x)), it: a[Symbol.asyncIterator]() };
  }

  it('answers garbage, unknown methods and bad params with typed errors and stays usable', async () => {
    const { send, it } = connect();
    await send('this is not json');
    expect((await next(it)).error).toMatchObject({ code: -32700, data: { code: 'INVALID_ARGUMENT' } });
    await send({ jsonrpc: '2.0', id: 1, method: 'no.such.method', params: {} });
    expect((await next(it)).error).toMatchObject({ code: -32601, data: { code: 'UNIMPLEMENTED' } });
    await send({ jsonrpc: '2.0', id: 2, method: 'hello', params: { protocol_version: 1 } });
    const bad = await next(it);
    expect(bad.error.data.code).toBe('INVALID_ARGUMENT');
    expect(bad.error.message).toContain('protocol_version');
    await send([1, 2, 3]);
    expect((await next(it)).error.data.code).toBe('INVALID_ARGUMENT');
    // An unknown notification is ignored: the next request is still answered.
    await send({ jsonrpc: '2.0', method: 'from.the.future', params: { x: 1 } });
    await send({ jsonrpc: '2.0', id: 3, method: 'hello', params: { protocol_version: '2.4', role: 'client' } });
    const ok = await next(it);
    expect(ok.id).toBe(3);
    expect(ok.result.protocol_version).toBe('2.0');
  });

  it('refuses an incompatible major version with a message naming both versions', async () => {
    const { send, it } = connect();
    // 1.0 is the old form, whose agents sent engine lines escaped into JSON text.
    await send({ jsonrpc: '2.0', id: 1, method: 'hello', params: { protocol_version: '1.0', role: 'agent' } });
    const r = await next(it);
    expect(r.error.data.code).toBe('FAILED_PRECONDITION');
    expect(r.error.message).toContain('peer speaks 1.0');
    expect(r.error.message).toContain('this side speaks 2.0');
  });

  it('requires hello first, and closes a connection that never says it', async () => {
    const { send, it } = connect();
    await send({ jsonrpc: '2.0', id: 1, method: 'sessions.list', params: {} });
    const early = await next(it);
    expect(early.error.data.code).toBe('FAILED_PRECONDITION');
    expect(early.error.message).toContain('hello first');
    const closed = await withTimeout(raw!.closed, 2_000, 'hello timeout');
    expect(closed.code).toBe('DEADLINE_EXCEEDED');
    expect(gateway!.directory.agentList().length).toBe(0);
  });

  it('an agent hello without a descriptor is refused and registers nothing', async () => {
    const { send, it } = connect();
    await send({ jsonrpc: '2.0', id: 1, method: 'hello', params: { protocol_version: '2.0', role: 'agent' } });
    expect((await next(it)).error.data.code).toBe('INVALID_ARGUMENT');
    expect(gateway!.directory.agentList().length).toBe(0);
  });

  it('fails pending requests when the channel closes, and times requests out', async () => {
    const [a, b] = memoryChannelPair();
    const peer = new RpcPeer(a, { requestTimeoutMs: 100 });
    void peer.run();
    const timedOut = peer.request('ping', {}).catch((e: TetherError) => e.code);
    expect(await timedOut).toBe('DEADLINE_EXCEEDED');
    const pending = peer.request('ping', {}, { timeoutMs: 0 }).catch((e: TetherError) => e.code);
    b.close();
    expect(await pending).toBe('UNAVAILABLE');
  });
});
