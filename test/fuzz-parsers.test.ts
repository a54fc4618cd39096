/**
 * Fuzzing (fast-check) of every parser that takes outside input (threats.md G2, B4-style bad
 * frames, issue 6 "limits and bad input"): the JSON-RPC frame dispatch of RpcPeer at the
 * gateway in each connection state, the engine stdout LineSplitter, the protocol schemas, and
 * the engine-input checks behind session.send. Never a throw or a crash; every error typed
 * with a canonical code (never INTERNAL); the connection stays usable afterwards.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineSplitter, PREVIEW_MAX_CHARS, type EngineLine } from '../agent/line-splitter.js';
import { memoryChannelPair, type MemoryChannel } from '../core/channel/memory.js';
import { ERROR_CODES, JSONRPC_PARSE_ERROR } from '../core/errors.js';
import { classify } from '../core/rpc/envelope.js';
import { Methods, Notifications } from '../core/protocol/methods.js';
import { TetherEvent } from '../core/protocol/events.js';
import { PROTOCOL_VERSION } from '../core/protocol/version.js';
import { describeIssues } from '../core/rpc/engine.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { Gateway } from '../gateway/gateway.js';
import { textFrame } from './support/channel-read.js';
import { withTimeout } from './support/stack.js';
import { perTest } from './support/per-test.js';
import { waitFor } from './support/wait.js';
import { TEST_SEED } from './support/seed.js';

const SEED = TEST_SEED;
const METHOD_NAMES = Object.keys(Methods);
const NOTIFICATION_NAMES = Object.keys(Notifications);

/** A raw channel into a gateway, reading every answer it gets. */
class RawConn {
  readonly answers: Record<string, any>[] = [];
  private readonly waiters = new Map<unknown, (m: Record<string, any>) => void>();
  private nextProbe = 1;

  constructor(readonly ch: MemoryChannel) {
    void (async () => {
      for await (const frame of ch) {
        const msg = JSON.parse(textFrame(frame)) as Record<string, any>; // a gateway frame that is not JSON fails here
        this.answers.push(msg);
        const w = this.waiters.get(msg.id);
        if (w && msg.id !== undefined) {
          this.waiters.delete(msg.id);
          w(msg);
        }
      }
    })();
  }

  send(frame: string): Promise<void> {
    return this.ch.send(frame);
  }

  /** A request with an id of our own; resolves with its answer. */
  async call(method: string, params: unknown, ms = 3_000): Promise<Record<string, any>> {
    const id = `probe-${this.nextProbe++}`;
    const answered = new Promise<Record<string, any>>((r) => this.waiters.set(id, r));
    await this.ch.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return withTimeout(answered, ms, `the answer to ${method}`);
  }
}

/** Every error answer is typed: a canonical code (never INTERNAL) or the JSON-RPC parse error. */
function checkAnswer(msg: Record<string, any>): void {
  expect(msg.jsonrpc).toBe('2.0');
  if (!('error' in msg)) {
    expect('result' in msg || 'method' in msg).toBe(true);
    return;
  }
  const e = msg.error as { code: number; message: string; data?: { code?: string } };
  expect(typeof e.message).toBe('string');
  expect(e.message).not.toMatch(/\n\s+at /); // never a stack trace
  expect(ERROR_CODES).toContain(e.data?.code);
  expect(e.data?.code).not.toBe('INTERNAL');
  if (e.code === JSONRPC_PARSE_ERROR) expect(e.data?.code).toBe('INVALID_ARGUMENT');
}

// ---- generators -----------------------------------------------------------------------

const anyId = fc.oneof(
  fc.integer(),
  fc.string({ maxLength: 10 }),
  fc.constant(null),
  fc.double(),
  fc.string({ minLength: 129, maxLength: 140 }),
  fc.boolean(),
);
const methodName = fc.oneof(
  fc.constantFrom(...METHOD_NAMES, ...NOTIFICATION_NAMES),
  fc.string({ maxLength: 20 }),
  fc.constant(''),
  fc.constant('__proto__'),
  fc.constant('constructor'),
);
const looseParams = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.dictionary(
    fc.constantFrom('session_id', 'seq', 'line', 'agent', 'input_id', 'from_seq', 'protocol_version', 'role', 'meta', 'event', 'options'),
    fc.jsonValue({ maxDepth: 2 }),
  ),
);
/** Objects that look like JSON-RPC messages, with any field missing, wrong or extra. */
const rpcShaped = fc.record(
  {
    jsonrpc: fc.oneof(fc.constant('2.0'), fc.constant('1.0'), fc.jsonValue({ maxDepth: 1 })),
    id: anyId,
    method: methodName,
    params: looseParams,
    result: fc.jsonValue({ maxDepth: 2 }),
    error: fc.oneof(fc.record({ code: fc.integer(), message: fc.string() }), fc.jsonValue({ maxDepth: 2 })),
  },
  { requiredKeys: [] },
);
/** A gateway and the memory channels one test opens; closed after each test of the calling describe block. */
const gatewayPerTest = () => perTest(() => ({ gateway: undefined as Gateway | undefined, chans: [] as MemoryChannel[] }));

/** Raw frames: random text, random JSON, JSON-RPC-shaped objects, and broken JSON. */
const frame = fc.oneof(
  { arbitrary: fc.string({ maxLength: 200 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 100 }), weight: 1 },
  { arbitrary: fc.json({ maxDepth: 3 }), weight: 2 },
  { arbitrary: rpcShaped.map((o) => JSON.stringify(o)), weight: 6 },
  { arbitrary: rpcShaped.map((o) => JSON.stringify(o).slice(0, -1)), weight: 1 },
);

describe('fuzz: JSON-RPC frames at the gateway (RpcPeer dispatch, classify, schemas)', () => {
  const rig = gatewayPerTest();

  function connect(): RawConn {
    const [a, b] = memoryChannelPair();
    rig.gateway!.accept(b);
    rig.chans.push(a);
    return new RawConn(a);
  }

  it('random frames before hello, as a client and as an agent: typed errors or ignored, and the link stays usable', async () => {
    rig.gateway = new Gateway();
    const fresh = connect();
    const asClient = connect();
    expect((await asClient.call('hello', { protocol_version: PROTOCOL_VERSION, role: 'client' })).result).toBeDefined();
    const asAgent = connect();
    const agentHello = await asAgent.call('hello', {
      protocol_version: PROTOCOL_VERSION,
      role: 'agent',
      agent: { name: 'fuzz-agent', host: 'h', engines: ['demo'], default_engine: 'demo' },
    });
    expect(agentHello.result).toBeDefined();
    let frames = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(frame, { minLength: 1, maxLength: 20 }), fc.constantFrom(fresh, asClient, asAgent), async (batch, conn) => {
        const before = conn.answers.length;
        for (const f of batch) await conn.send(f);
        frames += batch.length;
        // Still usable: a ping after the batch is answered (so every answer to the batch is in).
        const pong = await conn.call('ping', {});
        expect(pong.result).toEqual({});
        for (const a of conn.answers.slice(before)) checkAnswer(a);
        expect(conn.ch.isClosed).toBe(false);
      }),
      { seed: SEED, numRuns: 300 },
    );
    console.log(`fuzz-parsers: ${frames} random frames at the gateway (seed ${SEED})`);
  }, 20_000);

  it('classify, every params/result/notification schema and describeIssues never throw on random JSON', () => {
    const schemas = [...Object.values(Methods).flatMap((m) => [m.params, m.result]), ...Object.values(Notifications), TetherEvent];
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 4 }), rpcShaped, looseParams), (value) => {
        classify(value);
        for (const s of schemas) {
          const r = s.safeParse(value);
          if (!r.success) expect(describeIssues(r.error).length).toBeLessThan(2_000);
        }
      }),
      { seed: SEED, numRuns: 1_000 },
    );
  });

  it('a client peer reading from a hostile gateway: unknown or malformed frames never throw and requests still settle', async () => {
    const [mine, theirs] = memoryChannelPair();
    rig.chans.push(mine, theirs);
    const peer = new RpcPeer(mine, { requestTimeoutMs: 2_000 });
    const frames: unknown[] = [];
    peer.onNotification('session.frame', (f) => frames.push(f));
    void peer.run();
    const hostile = new RawConn(theirs);
    await fc.assert(
      fc.asyncProperty(fc.array(frame, { minLength: 1, maxLength: 20 }), async (batch) => {
        const before = hostile.answers.length;
        for (const f of batch) await hostile.send(f);
        const ping = peer.request('ping', {});
        // The hostile side answers the ping correctly after its garbage.
        const req = await withTimeout(
          (async () => {
            for (;;) {
              const m = hostile.answers.find((a, n) => n >= before && a.method === 'ping');
              if (m) return m;
              await new Promise((r) => setTimeout(r, 1));
            }
          })(),
          2_000,
          'the ping to reach the hostile side',
        );
        await hostile.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: {} }));
        expect(await ping).toEqual({});
        for (const a of hostile.answers.slice(before)) if (a.method !== 'ping') checkAnswer(a);
      }),
      { seed: SEED, numRuns: 150 },
    );
  }, 20_000);
});

// ---- engine stdout ----------------------------------------------------------------------

/** Byte pieces engines might write: JSON lines, junk, broken UTF-8, NUL, CR, newlines. */
const bytePiece = fc.oneof(
  fc.uint8Array({ maxLength: 40 }),
  fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(`${JSON.stringify(v)}\n`)),
  fc.object({ maxDepth: 2 }).map((v) => Buffer.from(`${JSON.stringify(v)}\r\n`)),
  fc.constantFrom(
    Buffer.from([0xff, 0xfe]),
    Buffer.from([0xc0, 0x80]), // overlong NUL
    Buffer.from([0xed, 0xa0, 0x80]), // an encoded surrogate
    Buffer.from([0xe2, 0x82]), // a truncated sequence
    Buffer.from([0x00]),
    Buffer.from('\n'),
    Buffer.from('\r'),
    Buffer.from('   \t\n'),
    Buffer.from('{"type":"assistant","x":"\u202e\u200b"}\n'),
  ),
);

function checkItem(item: EngineLine): void {
  if (item.kind === 'frame') {
    expect(typeof item.value).toBe('object');
    expect(Array.isArray(item.value)).toBe(false);
    expect(item.line.includes('\n')).toBe(false);
  } else {
    expect(['NOT_JSON', 'NOT_OBJECT', 'LINE_TOO_LONG', 'INVALID_UTF8']).toContain(item.code);
    expect(item.preview.length).toBeLessThanOrEqual(PREVIEW_MAX_CHARS);
    expect(item.preview).not.toMatch(/[\u0000-\u001f\u2028\u2029\u202e\u200b]/);
  }
}

describe('fuzz: engine stdout LineSplitter', () => {
  it('random bytes in random chunks: typed items, bounded buffer, the same items however the bytes are chunked', () => {
    let bytes = 0;
    fc.assert(
      fc.property(
        fc.array(bytePiece, { maxLength: 40 }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 10 }),
        fc.integer({ min: 8, max: 256 }),
        (pieces, cuts, cap) => {
          const all = Buffer.concat(pieces);
          bytes += all.length;
          const whole = new LineSplitter(cap);
          const expected = whole.end(whole.push(all));
          const chunked = new LineSplitter(cap);
          const got: EngineLine[] = [];
          for (let at = 0, n = 0; at < all.length; n++) {
            const len = cuts[n % cuts.length];
            chunked.push(all.subarray(at, at + len), got);
            expect(chunked.bufferedBytes).toBeLessThanOrEqual(cap);
            at += len;
          }
          chunked.end(got);
          // LINE_TOO_LONG reports what was seen when the cap was crossed, which depends on the
          // chunking by contract (a lower bound and a preview of it); everything else must match.
          const norm = (items: EngineLine[]) =>
            items.map((i) => (i.kind === 'invalid' && i.code === 'LINE_TOO_LONG' ? { kind: i.kind, code: i.code } : i));
          expect(norm(got)).toEqual(norm(expected));
          for (const i of got) if (i.kind === 'invalid' && i.code === 'LINE_TOO_LONG') expect(i.bytes).toBeGreaterThan(cap);
          for (const item of got) checkItem(item);
          // Nothing invented: at most one item per newline-separated piece.
          expect(got.length).toBeLessThanOrEqual(all.filter((b) => b === 0x0a).length + 1);
        },
      ),
      { seed: SEED, numRuns: 1_000 },
    );
    console.log(`fuzz-parsers: LineSplitter fed ${bytes} random bytes (seed ${SEED})`);
  });
});

// ---- session.send lines ----------------------------------------------------------------

const lineType = fc.oneof(
  fc.constantFrom('user', 'control_request', 'control_response', 'control_cancel_request', 'keep_alive'),
  fc.string({ maxLength: 12 }),
  fc.jsonValue({ maxDepth: 1 }),
);
/** Engine input lines: the accepted shapes with fields missing, of the wrong type, or extra. */
const inputLine = fc.oneof(
  fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 }),
  fc.record(
    {
      type: lineType,
      message: fc.oneof(
        fc.record(
          {
            role: fc.oneof(fc.constant('user'), fc.string()),
            content: fc.oneof(
              fc.string({ maxLength: 30 }),
              fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
              fc.jsonValue({ maxDepth: 1 }),
            ),
          },
          { requiredKeys: [] },
        ),
        fc.jsonValue({ maxDepth: 2 }),
      ),
      request_id: fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.constant(null)),
      request: fc.oneof(
        fc.record(
          { subtype: fc.oneof(fc.constantFrom('interrupt', 'set_model', 'initialize', 'can_use_tool'), fc.string(), fc.integer()) },
          { requiredKeys: [] },
        ),
        fc.jsonValue({ maxDepth: 2 }),
      ),
      response: fc.oneof(
        fc.record(
          {
            subtype: fc.oneof(fc.constantFrom('success', 'error'), fc.string()),
            request_id: fc.oneof(fc.string({ maxLength: 12 }), fc.integer()),
            response: fc.jsonValue({ maxDepth: 2 }),
          },
          { requiredKeys: [] },
        ),
        fc.jsonValue({ maxDepth: 2 }),
      ),
      uuid: fc.oneof(fc.uuid(), fc.jsonValue({ maxDepth: 1 })),
    },
    { requiredKeys: ['type'] },
  ),
);

describe('fuzz: engine input lines through session.send', () => {
  const rig = gatewayPerTest();

  it('random lines get "applied" or a typed error; only well-formed lines reach the engine; the session stays usable', async () => {
    rig.gateway = new Gateway();
    // A fake agent over memory: spawns nothing, confirms every input it gets.
    const [agentEnd, gwAgentEnd] = memoryChannelPair();
    rig.chans.push(agentEnd);
    rig.gateway.accept(gwAgentEnd);
    const agent = new RpcPeer(agentEnd);
    const toEngine: Record<string, unknown>[] = [];
    agent
      .onRequest('agent.spawn', () => ({ pid: 1, engine: 'demo' }))
      .onRequest('agent.stop', () => ({}))
      .onNotification('agent.input', (p) => {
        toEngine.push(p.line);
        void agent.notify('session.input_ack', { session_id: p.session_id, seq: p.seq });
      });
    void agent.run();
    await agent.request('hello', {
      protocol_version: PROTOCOL_VERSION,
      role: 'agent',
      agent: { name: 'fuzz-agent', host: 'h', engines: ['demo'], default_engine: 'demo' },
    });

    const [clientEnd, gwClientEnd] = memoryChannelPair();
    rig.chans.push(clientEnd);
    rig.gateway.accept(gwClientEnd);
    const conn = new RawConn(clientEnd);
    await conn.call('hello', { protocol_version: PROTOCOL_VERSION, role: 'client' });
    const created = await conn.call('session.create', { agent: 'fuzz-agent', options: {} });
    const sessionId = created.result.session.id as string;

    let n = 0;
    const outcomes: Record<string, number> = {};
    await fc.assert(
      fc.asyncProperty(inputLine, fc.boolean(), async (line, reuseId) => {
        const answer = await conn.call('session.send', {
          session_id: sessionId,
          input_id: reuseId && n > 0 ? `in-${n - 1}` : `in-${n}`,
          line,
        });
        n++;
        checkAnswer(answer);
        const key = answer.error ? String(answer.error.data.code) : String(answer.result.status);
        outcomes[key] = (outcomes[key] ?? 0) + 1;
      }),
      { seed: SEED, numRuns: 800 },
    );
    // Whatever reached the engine has one of the accepted types; prompts have real content.
    for (const line of toEngine) {
      expect(['user', 'control_request', 'control_response', 'control_cancel_request']).toContain(line.type);
      if (line.type === 'user') {
        const m = line.message as { role: unknown; content: unknown };
        expect(m.role).toBe('user');
        expect(typeof m.content === 'string' || Array.isArray(m.content)).toBe(true);
      }
      if (line.type === 'control_request') expect(typeof (line.request as { subtype?: unknown }).subtype).toBe('string');
    }
    // Still usable: a good prompt is applied and reaches the engine.
    const ok = await conn.call('session.send', {
      session_id: sessionId,
      input_id: 'final',
      line: { type: 'user', message: { role: 'user', content: 'still here' } },
    });
    expect(ok.result).toEqual({ status: 'applied' });
    await waitFor(
      () => toEngine.some((l) => (l.message as { content?: unknown } | undefined)?.content === 'still here'),
      2_000,
      'the good prompt at the engine',
    );
    console.log(`fuzz-parsers: ${n} random session.send lines: ${JSON.stringify(outcomes)}; ${toEngine.length} reached the engine`);
  }, 20_000);
});
