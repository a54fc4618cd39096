/**
 * The one JSON-RPC engine (core/rpc/engine.ts), on its own over an in-memory channel pair:
 * the native protocol, the JSON-RPC dialect and the web page all run on it, so what it does
 * with bad input, correlation, timeouts and a peer that stops reading is what all three do.
 * Every wait is bounded; every channel is closed after each test.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { memoryChannelPair, type MemoryChannel } from '../core/channel/memory.js';
import { TetherError } from '../core/errors.js';
import { LATER, replyTooLarge, RpcEngine, SLOW_CONSUMER_REASON, utf8Length, type SharedHandlers } from '../core/rpc/engine.js';
import { readMessage } from '../core/rpc/envelope.js';
import { withTimeout } from './support/wait.js';

const METHODS = {
  add: z.object({ a: z.number(), b: z.number() }),
  later: z.object({}),
  slow: z.object({}),
  refuse: z.object({}),
  fragile: z.object({}),
  big: z.object({ chars: z.number().int() }),
  unserved: z.object({}),
};
const NOTIFICATIONS = { note: z.object({ text: z.string() }) };

const open: MemoryChannel[] = [];
afterEach(() => {
  for (const ch of open.splice(0)) ch.close();
});

/**
 * An engine on one end of a memory pair (reading it as its owner would), and the raw other
 * end: what the test sends there reaches the engine, what the engine answers is read there.
 */
function rig(
  opts: {
    requestTimeoutMs?: number;
    maxBufferedBytes?: number;
    maxFrameBytes?: number;
    inboundHighWaterFrames?: number;
    onSlowConsumer?: (n: number) => void;
  } = {},
) {
  const [mine, raw] = memoryChannelPair({ maxFrameBytes: opts.maxFrameBytes, inboundHighWaterFrames: opts.inboundHighWaterFrames });
  open.push(mine, raw);
  const notes: string[] = [];
  let answerLater: ((result: unknown) => void) | undefined;
  const engine = new RpcEngine(mine, {
    methods: METHODS,
    notifications: NOTIFICATIONS,
    unavailableHint: 'say hello first',
    requestTimeoutMs: opts.requestTimeoutMs,
    maxBufferedBytes: opts.maxBufferedBytes,
    onSlowConsumer: opts.onSlowConsumer,
  })
    .handle('add', ({ a, b }) => ({ sum: a + b }))
    .handle('later', (_p, id) => {
      answerLater = (result) => engine.respond(id, 'later', result);
      return LATER;
    })
    .handle('slow', () => new Promise((resolve) => setTimeout(() => resolve({ done: true }), 20)))
    .handle('refuse', () => {
      throw new TetherError('PERMISSION_DENIED', 'not yours');
    })
    .handle('fragile', () => Promise.reject(new Error('boom')))
    .handle('big', ({ chars }) => ({ text: 'x'.repeat(chars) }))
    .onNotification('note', ({ text }) => notes.push(text));
  void (async () => {
    for await (const frame of mine) if (typeof frame === 'string') engine.receive(frame);
    engine.end((await mine.closed).reason);
  })();
  const it = raw[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, any>> => {
    const r = await withTimeout(it.next(), 2_000, 'a frame from the engine');
    if (r.done) throw new Error('the channel ended');
    return JSON.parse(r.value as string);
  };
  const send = (x: unknown) => raw.send(typeof x === 'string' ? x : JSON.stringify(x));
  return { engine, raw, mine, next, send, notes, answerLater: (r: unknown) => answerLater?.(r) };
}

describe('the JSON-RPC envelope (core/rpc/envelope.ts)', () => {
  it.each([
    ['{not json', -32700, /parse error/],
    ['[{"jsonrpc":"2.0","id":1,"method":"add"}]', -32600, /batches/],
    ['[]', -32600, /batches/],
    ['"text"', -32600, /not a JSON object/],
    ['{"id":7,"method":"add"}', -32600, /"jsonrpc": "2.0"/],
    ['{"jsonrpc":"2.0","id":"a","method":3}', -32600, /"method" must be a string/],
    [`{"jsonrpc":"2.0","id":1,"method":"${'m'.repeat(129)}"}`, -32600, /"method" must be a string of 1 to 128/],
    ['{"jsonrpc":"2.0","id":{"x":1},"method":"add"}', -32600, /"id" must be/],
    ['{"jsonrpc":"2.0","id":1.5,"method":"add"}', -32600, /"id" must be/],
    ['{"jsonrpc":"2.0","id":1e300,"method":"add"}', -32600, /"id" must be/],
    [`{"jsonrpc":"2.0","id":"${'i'.repeat(129)}","result":{}}`, -32600, /"id" must be/],
    ['{"jsonrpc":"2.0","id":9}', -32600, /neither/],
    ['{"jsonrpc":"2.0","id":9,"result":1,"error":{"code":1,"message":"m"}}', -32600, /neither/],
    ['{"jsonrpc":"2.0","id":9,"error":{"code":"x","message":"m"}}', -32600, /a response error needs/],
  ])('%s is invalid (%s)', (text, code, why) => {
    const msg = readMessage(text);
    expect(msg).toMatchObject({ kind: 'invalid', code });
    expect(msg.kind === 'invalid' && msg.message).toMatch(why);
  });

  it('reads requests, notifications, results and errors (id null when the peer could not read ours)', () => {
    expect(readMessage('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0"}}')).toEqual({
      kind: 'request',
      id: 1,
      method: 'initialize',
      params: { protocol_version: '1.0' },
    });
    expect(readMessage('{"jsonrpc":"2.0","method":"anything"}')).toEqual({ kind: 'notification', method: 'anything', params: undefined });
    expect(readMessage('{"jsonrpc":"2.0","id":"g-1","result":{"decision":"allow"}}')).toEqual({
      kind: 'response',
      id: 'g-1',
      result: { decision: 'allow' },
    });
    expect(readMessage('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"no","data":{"code":"INVALID_ARGUMENT"}}}')).toEqual({
      kind: 'response',
      id: null,
      error: { code: -32700, message: 'no', data: { code: 'INVALID_ARGUMENT' } },
    });
  });
});

describe('the JSON-RPC engine (core/rpc/engine.ts)', () => {
  it('serves one shared table on many connections, each handler given its own connection; handle() goes first', async () => {
    type Conn = { name: string; notes: string[] };
    const table: SharedHandlers<Conn> = {
      requests: {
        add: (self: Conn, { a, b }: { a: number; b: number }) => ({ sum: a + b, by: self.name }),
        refuse: () => {
          throw new TetherError('PERMISSION_DENIED', 'not yours');
        },
      },
      notifications: { note: (self: Conn, { text }: { text: string }) => self.notes.push(text) },
    };
    const ends = ['one', 'two'].map((name) => {
      const [mine, raw] = memoryChannelPair();
      open.push(mine, raw);
      const self: Conn = { name, notes: [] };
      const engine = new RpcEngine(mine, { methods: METHODS, notifications: NOTIFICATIONS }).serve(table, self);
      void (async () => {
        for await (const frame of mine) if (typeof frame === 'string') engine.receive(frame);
      })();
      const it = raw[Symbol.asyncIterator]();
      const next = async () => JSON.parse((await withTimeout(it.next(), 2_000, 'an answer')).value as string);
      return { engine, raw, self, next };
    });
    ends[1].engine.handle('add', () => ({ own: true }));
    for (const e of ends) await e.raw.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'add', params: { a: 2, b: 3 } }));
    expect(await ends[0].next()).toEqual({ jsonrpc: '2.0', id: 1, result: { sum: 5, by: 'one' } });
    expect(await ends[1].next()).toEqual({ jsonrpc: '2.0', id: 1, result: { own: true } });
    // The table's methods are checked and answered as handle()'s are: bad params, thrown errors, methods it lacks.
    const [a] = ends;
    await a.raw.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'add', params: { a: 'x' } }));
    expect(await a.next()).toMatchObject({ id: 2, error: { data: { code: 'INVALID_ARGUMENT' } } });
    await a.raw.send(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'refuse', params: {} }));
    expect(await a.next()).toMatchObject({ id: 3, error: { message: 'not yours', data: { code: 'PERMISSION_DENIED' } } });
    await a.raw.send(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'slow', params: {} }));
    expect(await a.next()).toMatchObject({ id: 4, error: { data: { code: 'FAILED_PRECONDITION' } } });
    await a.raw.send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'toString', params: {} }));
    expect(await a.next()).toMatchObject({ id: 5, error: { data: { code: 'UNIMPLEMENTED' } } });
    await a.raw.send(JSON.stringify({ jsonrpc: '2.0', method: 'note', params: { text: 'hi' } }));
    await a.raw.send(JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'add', params: { a: 0, b: 0 } }));
    await a.next(); // in order: the note was handled before this answer
    expect(a.self.notes).toEqual(['hi']);
    expect(ends[1].self.notes).toEqual([]);
  });

  it('answers a frame that is not JSON -32700 and a bad envelope -32600, both with id null, and stays usable', async () => {
    const { send, next } = rig();
    await send('{not json');
    expect(await next()).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32700, message: 'parse error: the frame is not valid JSON', data: { code: 'INVALID_ARGUMENT' } },
    });
    await send({ jsonrpc: '1.0', id: 4, method: 'add', params: { a: 1, b: 2 } });
    expect(await next()).toMatchObject({ id: null, error: { code: -32600, data: { code: 'INVALID_ARGUMENT' } } });
    await send({ jsonrpc: '2.0', id: 5, method: 'add', params: { a: 1, b: 2 } });
    expect(await next()).toEqual({ jsonrpc: '2.0', id: 5, result: { sum: 3 } });
  });

  it('answers an unknown method -32601 (Object.prototype names too), a known one without a handler FAILED_PRECONDITION with the hint', async () => {
    const { send, next } = rig();
    for (const [id, method] of [
      [1, 'no.such'],
      [2, '__proto__'],
      [3, 'toString'],
    ] as const) {
      await send({ jsonrpc: '2.0', id, method, params: {} });
      expect(await next()).toMatchObject({
        id,
        error: { code: -32601, message: `unknown method: ${method}`, data: { code: 'UNIMPLEMENTED' } },
      });
    }
    await send({ jsonrpc: '2.0', id: 4, method: 'unserved' });
    expect(await next()).toMatchObject({
      id: 4,
      error: {
        code: -32009,
        message: 'unserved is not available on this connection (say hello first)',
        data: { code: 'FAILED_PRECONDITION' },
      },
    });
  });

  it('answers bad params -32602 naming the failing path, and never calls the handler', async () => {
    const { send, next } = rig();
    await send({ jsonrpc: '2.0', id: 'x', method: 'add', params: { a: 1, b: 'two' } });
    const r = await next();
    expect(r).toMatchObject({ id: 'x', error: { code: -32602, data: { code: 'INVALID_ARGUMENT' } } });
    expect(r.error.message).toMatch(/^invalid params for add: b: /);
  });

  it("answers a handler's value, promise, thrown TetherError, rejected Error and a LATER answer, each with its id", async () => {
    const { send, next, answerLater } = rig();
    await send({ jsonrpc: '2.0', id: 1, method: 'later' });
    await send({ jsonrpc: '2.0', id: 2, method: 'slow' });
    await send({ jsonrpc: '2.0', id: 3, method: 'refuse' });
    await send({ jsonrpc: '2.0', id: 4, method: 'fragile' });
    expect(await next()).toMatchObject({ id: 3, error: { code: -32007, message: 'not yours', data: { code: 'PERMISSION_DENIED' } } });
    expect(await next()).toMatchObject({ id: 4, error: { code: -32603, message: 'boom', data: { code: 'INTERNAL' } } });
    expect(await next()).toEqual({ jsonrpc: '2.0', id: 2, result: { done: true } });
    answerLater({ at: 'last' });
    expect(await next()).toEqual({ jsonrpc: '2.0', id: 1, result: { at: 'last' } });
  });

  it('replaces an answer over the frame limit by RESOURCE_EXHAUSTED to the same id', async () => {
    const { send, next } = rig({ maxFrameBytes: 4_096 });
    await send({ jsonrpc: '2.0', id: 1, method: 'big', params: { chars: 10_000 } });
    const r = await next();
    expect(r).toMatchObject({ id: 1, error: { data: { code: 'RESOURCE_EXHAUSTED', limit: 4_096 } } });
    expect(r.error.message).toMatch(/^the answer to big is \d+ bytes, over the frame limit of 4096$/);
    expect(replyTooLarge('session_list', 'é'.repeat(3_000), 4_096)?.message).toMatch(/6000 bytes.*ask for pages/);
  });

  it('hands notifications in its table to their handler, drops those with bad params and ignores unknown ones', async () => {
    const { send, next, notes } = rig();
    await send({ jsonrpc: '2.0', method: 'note', params: { text: 'one' } });
    await send({ jsonrpc: '2.0', method: 'note', params: { text: 2 } });
    await send({ jsonrpc: '2.0', method: 'from.the.future', params: {} });
    await send({ jsonrpc: '2.0', method: 'note', params: { text: 'two' } });
    await send({ jsonrpc: '2.0', id: 9, method: 'add', params: { a: 0, b: 0 } });
    expect(await next()).toMatchObject({ id: 9 }); // nothing was answered before it
    expect(notes).toEqual(['one', 'two']);
  });

  it("correlates answers to its requests by id, in whatever order they come, and rebuilds the peer's error", async () => {
    const { engine, next, send } = rig();
    const first = engine.request('one', { n: 1 });
    const second = engine.call('two', { n: 2 });
    const q1 = await next();
    const q2 = await next();
    expect(q1).toEqual({ jsonrpc: '2.0', id: 1, method: 'one', params: { n: 1 } });
    expect(q2).toMatchObject({ id: 2, method: 'two' });
    expect(second.id).toBe(2);
    await send({ jsonrpc: '2.0', id: 77, result: 'nobody asked' }); // ignored
    await send({ jsonrpc: '2.0', id: 2, error: { code: -32005, message: 'gone', data: { code: 'NOT_FOUND', session_id: 's' } } });
    await send({ jsonrpc: '2.0', id: 1, result: { one: true } });
    await expect(second.reply).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'gone', details: { session_id: 's' } });
    expect(await first).toEqual({ one: true });
    expect(engine.pendingCount).toBe(0);
  });

  it('names its requests with a prefix when asked ("g-1"), as the dialect does', async () => {
    const [mine, raw] = memoryChannelPair();
    open.push(mine, raw);
    const engine = new RpcEngine(mine, { methods: {}, idPrefix: 'g-' });
    const calls = [engine.call('permission_request', {}), engine.call('permission_request', {})];
    expect(calls.map((c) => c.id)).toEqual(['g-1', 'g-2']);
    // Nobody answers: cancelled, so no 30-s deadline outlives the test in a shared worker.
    for (const c of calls) {
      engine.cancel(c.id);
      await expect(c.reply).rejects.toMatchObject({ code: 'CANCELLED' });
    }
  });

  it('rejects a request with no answer in time DEADLINE_EXCEEDED, and ignores the late answer', async () => {
    const { engine, next, send } = rig({ requestTimeoutMs: 50 });
    const started = Date.now();
    const asked = engine.request('silence', {});
    const q = await next();
    await expect(withTimeout(asked, 2_000, 'the timeout')).rejects.toMatchObject({
      code: 'DEADLINE_EXCEEDED',
      message: 'silence got no answer within 50 ms',
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    await send({ jsonrpc: '2.0', id: q.id, result: {} });
    await send({ jsonrpc: '2.0', id: 1, method: 'add', params: { a: 1, b: 1 } });
    expect(await next()).toMatchObject({ id: 1, result: { sum: 2 } });
    expect(engine.pendingCount).toBe(0);
  });

  it('rejects a cancelled request CANCELLED, and every waiting request UNAVAILABLE when the connection ends', async () => {
    const { engine, next, raw } = rig();
    const cancelled = engine.call('a', {});
    const waiting = engine.request('b', {});
    await next();
    await next();
    engine.cancel(cancelled.id);
    await expect(cancelled.reply).rejects.toMatchObject({ code: 'CANCELLED' });
    raw.close('OK', 'bye');
    await expect(withTimeout(waiting, 2_000, 'the close')).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: 'connection closed before the answer: bye',
    });
  });

  it('cuts a peer that stops reading, once past its budget: RESOURCE_EXHAUSTED with the one slow-consumer reason, once', async () => {
    const cuts: number[] = [];
    // The raw side never reads: past one queued frame it stops taking more, and our side holds the rest.
    const { engine, mine, raw } = rig({ maxBufferedBytes: 10_000, inboundHighWaterFrames: 1, onSlowConsumer: (n) => cuts.push(n) });
    const chunk = { text: 'y'.repeat(1_000) };
    let sent = 0;
    for (let i = 0; i < 200 && engine.postNotification('note', chunk); i++) {
      sent++;
      await new Promise((r) => setImmediate(r)); // let the pair move what the reader takes
    }
    expect(sent).toBeGreaterThan(5);
    expect(sent).toBeLessThan(200);
    expect(await withTimeout(mine.closed, 2_000, 'the cut')).toEqual({
      code: 'RESOURCE_EXHAUSTED',
      reason: SLOW_CONSUMER_REASON,
      byPeer: false,
    });
    const theirs = await withTimeout(raw.closed, 2_000, 'the cut at the peer');
    expect(theirs).toMatchObject({ code: 'RESOURCE_EXHAUSTED', reason: SLOW_CONSUMER_REASON });
    expect(cuts).toHaveLength(1);
    expect(cuts[0]).toBeGreaterThan(10_000);
    expect(engine.postNotification('note', chunk)).toBe(false);
    expect(engine.admit()).toBe(false);
    expect(cuts).toHaveLength(1);
  });

  it('uses no global of Node (the layering rule sees imports only): the web page runs it in a browser', () => {
    for (const f of ['engine.ts', 'envelope.ts']) {
      const code = readFileSync(new URL(`../core/rpc/${f}`, import.meta.url), 'utf8').replace(/\/\*\*[\s\S]*?\*\/|\/\/.*$/gm, ''); // comments may name them
      expect([f, code.match(/\b(Buffer|process|NodeJS|global|require|__dirname)\b/g)]).toEqual([f, null]);
    }
  });

  it('counts UTF-8 bytes without Node as Buffer.byteLength does', () => {
    for (const s of ['', 'ascii', 'é', '€', '😀', 'a😀b', '\ud83d', '\ude00x', 'x\ud83d', 'ß'.repeat(100) + '中文'.repeat(50)]) {
      expect([s, utf8Length(s)]).toEqual([s, Buffer.byteLength(s)]);
    }
  });
});
