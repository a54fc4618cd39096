import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { FAST_BINARY_CHECKS, FAST_NOTIFICATION_CHECKS } from '../core/wire/fast-checks.js';
import {
  agentInputText,
  BinaryNotifications,
  Notifications,
  type BinaryNotificationName,
  type NotificationName,
  type NotificationParams,
} from '../core/protocol/methods.js';
import { classifyBySchema } from '../core/protocol/jsonrpc.js';
import { classify } from '../core/rpc/envelope.js';

/**
 * The hand-written checks of the round trip's hot messages against their zod schemas (the one
 * definition): over every value generated here, a check that says yes must be right (the schema
 * accepts the value and returns it unchanged), and it must say yes to the usual messages (or
 * the fast path is dead code).
 */

/** Values a field may be given in place of a good one: each edge zod decides on. */
const ODD: unknown[] = [
  undefined,
  null,
  '',
  'x',
  'x'.repeat(64),
  'x'.repeat(65),
  'x'.repeat(128),
  'x'.repeat(129),
  'x'.repeat(256),
  'x'.repeat(257),
  'é'.repeat(128),
  0,
  -0,
  1,
  -1,
  1.5,
  2 ** 53 - 1,
  2 ** 53,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  true,
  false,
  [],
  [1],
  {},
  { type: 'user' },
  JSON.parse('{"__proto__":{"type":"user"},"type":"user"}'),
  Object.create(null),
  new Date(0),
  new (class Line {
    type = 'user';
  })(),
];

/** The good value, then every key set to every odd value, removed, and one key added. */
function variants(good: Record<string, unknown>, nested: Record<string, Record<string, unknown>> = {}): unknown[] {
  const out: unknown[] = [good, JSON.parse(JSON.stringify(good))];
  for (const key of Object.keys(good)) {
    for (const odd of ODD) out.push({ ...good, [key]: odd });
    const { [key]: _gone, ...rest } = good;
    out.push(rest);
  }
  for (const [key, inner] of Object.entries(nested)) for (const v of variants(inner)) out.push({ ...good, [key]: v });
  out.push({ ...good, extra: 1 }, JSON.parse(`{"__proto__":1,${JSON.stringify(good).slice(1)}`));
  for (const odd of ODD) out.push(odd);
  return out;
}

const line = { type: 'user', message: { role: 'user', content: 'hi' }, parent_tool_use_id: null, session_id: 'default' };
const SESSION = '6b1f0e7c-8a4e-4f3a-9c2b-0d1e2f3a4b5c';
/** A W3C trace context, as messages carry it while tracing is on. */
const trace = { traceparent: `00-${'0af7651916cd43dd8448eb211c80319c'}-${'b7ad6b7169203331'}-01`, tracestate: 'vendor=x' };

/** The echo of a prompt, as a `session.frame` carries it. */
const echo = {
  type: 'tether',
  subtype: 'prompt',
  principal: 'p',
  client_id: 'c-1',
  message: line.message,
  input_id: 'in-1',
  at: '2026-12-01T10:00:00.000Z',
};

/** The usual message of each checked method, and any further fields it may carry. */
const GOOD: Record<
  string,
  { schema: z.ZodType; check: (p: unknown) => boolean; usual: Record<string, unknown>[]; nested?: Record<string, Record<string, unknown>> }
> = {
  'session.post': {
    schema: Notifications['session.post'],
    check: FAST_NOTIFICATION_CHECKS['session.post']!,
    usual: [
      { session_id: SESSION, input_id: 'in-1', line },
      { session_id: SESSION, input_id: 'in-1', line, trace },
    ],
    nested: { trace },
  },
  'session.frame': {
    schema: Notifications['session.frame'],
    check: FAST_NOTIFICATION_CHECKS['session.frame']!,
    usual: [
      {
        session_id: SESSION,
        seq: 5,
        origin: 'gateway',
        event: echo,
      },
      // As the gateway writes it: every prompt stamped with a uuid (turn-authors.ts).
      { session_id: SESSION, seq: 7, origin: 'gateway', event: { ...echo, uuid: '0b6e1c9a-2f4d-4e8b-9a7c-3d5e6f708192' } },
      {
        session_id: SESSION,
        seq: 6,
        origin: 'gateway',
        event: { type: 'tether', subtype: 'prompt', principal: 'p', client_id: 'c-1', message: [{ type: 'text', text: 'x' }], at: 'now' },
      },
    ],
    nested: {
      event: {
        type: 'tether',
        subtype: 'prompt',
        principal: 'p',
        client_id: 'c-1',
        message: 'm',
        input_id: 'in-2',
        uuid: 'u-1',
        at: 'now',
      },
    },
  },
  'agent.input': {
    schema: Notifications['agent.input'],
    check: FAST_NOTIFICATION_CHECKS['agent.input']!,
    usual: [
      { session_id: SESSION, seq: 3, line },
      { session_id: SESSION, seq: 3, line, ack: 7 },
      { session_id: SESSION, seq: 3, line, ack: 7, trace },
    ],
    nested: { trace },
  },
  'session.output': {
    schema: BinaryNotifications['session.output'],
    check: FAST_BINARY_CHECKS['session.output']!,
    usual: [
      { session_id: SESSION, seq: 12, meta: { type: 'assistant' }, read_at_ms: 1_760_000_000_000 },
      {
        session_id: SESSION,
        seq: 13,
        meta: { type: 'result', subtype: 'success', is_error: false },
        read_at_ms: 1_760_000_000_000,
        input_ack: 4,
      },
      { session_id: SESSION, seq: 14, meta: {} },
      { session_id: SESSION, seq: 15, meta: { type: 'assistant' }, trace },
    ],
    nested: { meta: { type: 'control_request', subtype: 'can_use_tool', request_id: 'r-1', is_error: true, state: 'idle' }, trace },
  },
};

describe('fast checks of the hot messages agree with their schemas', () => {
  for (const [method, { schema, check, usual, nested }] of Object.entries(GOOD)) {
    it(`${method}: says yes to the usual messages`, () => {
      for (const u of usual) expect(check(JSON.parse(JSON.stringify(u)))).toBe(true);
    });

    it(`${method}: says yes only where the schema returns the value unchanged`, () => {
      let yes = 0;
      let no = 0;
      for (const u of usual) {
        for (const v of variants(u, nested)) {
          if (!check(v)) {
            no++;
            continue;
          }
          yes++;
          const parsed = schema.safeParse(v);
          expect(parsed.success, `${method} ${JSON.stringify(v)}`).toBe(true);
          expect(parsed.data, `${method} ${JSON.stringify(v)}`).toStrictEqual(v);
        }
      }
      expect(yes).toBeGreaterThan(usual.length);
      expect(no).toBeGreaterThan(50);
    });
  }

  it('has a test case for every method it checks', () => {
    expect(Object.keys({ ...FAST_NOTIFICATION_CHECKS, ...FAST_BINARY_CHECKS }).sort()).toEqual(Object.keys(GOOD).sort());
  });

  it('keys each check by a method of its own table (core/wire does not import the schemas, so this ties the names)', () => {
    // Checked by tsc too: a check under a name that is no method of its table does not compile here.
    const json: readonly NotificationName[] = Object.keys(FAST_NOTIFICATION_CHECKS) as (keyof typeof FAST_NOTIFICATION_CHECKS)[];
    const binary: readonly BinaryNotificationName[] = Object.keys(FAST_BINARY_CHECKS) as (keyof typeof FAST_BINARY_CHECKS)[];
    for (const name of json) expect(Object.keys(Notifications), name).toContain(name);
    for (const name of binary) expect(Object.keys(BinaryNotifications), name).toContain(name);
  });
});

describe('classify', () => {
  const usual = [
    { jsonrpc: '2.0', method: 'session.post', params: { session_id: SESSION } },
    { jsonrpc: '2.0', id: 7, method: 'session.send', params: {} },
    { jsonrpc: '2.0', id: 'abc', method: 'ping' },
    { jsonrpc: '2.0', id: 7, result: {} },
    { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } },
  ];

  it('answers as the schemas do, for every generated message', () => {
    let n = 0;
    for (const u of usual) {
      for (const v of variants(u)) {
        n++;
        expect(classify(v), JSON.stringify(v)).toStrictEqual(classifyBySchema(v));
      }
    }
    expect(n).toBeGreaterThan(300);
  });

  it('classifies the usual request and notification, and refuses a method name over 128 characters', () => {
    expect(classify(usual[0])).toEqual({ kind: 'notification', method: 'session.post', params: usual[0].params });
    expect(classify(usual[1])).toEqual({ kind: 'request', id: 7, method: 'session.send', params: {} });
    expect(classify({ jsonrpc: '2.0', method: 'm'.repeat(129) })).toBeUndefined();
  });
});

describe('the hand-written agent.input', () => {
  it('is the text JSON.stringify writes, and reads back through the schema unchanged', () => {
    const cases: NotificationParams<'agent.input'>[] = [
      { session_id: SESSION, seq: 1, line },
      { session_id: 'q"\\é\u2028', seq: 2 ** 40, line: { type: 'user', message: { role: 'user', content: 'a "quote" \\ é \n' } }, ack: 0 },
      { session_id: 's', seq: 3, line: { type: 'control_request', request_id: 'g-1', request: { subtype: 'interrupt' } }, ack: 17 },
    ];
    for (const params of cases) {
      const { line: l, ...rest } = params;
      const text = agentInputText(rest, JSON.stringify(l));
      expect(text).toBe(JSON.stringify({ jsonrpc: '2.0', method: 'agent.input', params }));
      expect(Notifications['agent.input'].parse(JSON.parse(text).params)).toEqual(params);
    }
  });
});
