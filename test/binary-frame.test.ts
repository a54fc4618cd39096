/**
 * Binary frames below and above the channel: the WebSocket layout (length-prefixed header,
 * opaque body), a malformed binary message from a raw peer, and how an RpcPeer hands binary
 * frames to its handler in order with JSON-RPC messages (or refuses them when none is set).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { decodeBinaryFrame, encodeBinaryFrame, MAX_BINARY_HEADER_BYTES } from '../core/wire/binary-frame.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Channel } from '../core/channel/channel.js';
import type { BinaryFrame } from '../core/wire/frame.js';
import { memoryChannelPair } from '../core/channel/memory.js';
import type { TetherError } from '../core/errors.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { BinaryHeaders, BinaryNotifications, type BinaryNotificationParams } from '../core/protocol/methods.js';
import { attachWsListener, WS_PATH } from '../gateway/listen/listen-ws.js';

const bounded = <T>(p: Promise<T>, what: string, ms = 5_000): Promise<T> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms).unref())]);

describe('the hand-written header of session.output', () => {
  it('is the text JSON.stringify writes, and reads back through the schema unchanged', () => {
    const cases: BinaryNotificationParams<'session.output'>[] = [
      { session_id: 's-1', seq: 1, meta: {} },
      { session_id: '3f1c2a9e-1b2c-4d5e-8f90-123456789abc', seq: 2 ** 40, meta: { type: 'assistant' }, read_at_ms: 1_796_110_715_844 },
      { session_id: 'q"\\é\u2028', seq: 7, meta: { type: 'result', subtype: 'error "x"', is_error: true }, read_at_ms: 0 },
      { session_id: 'c', seq: 3, meta: { type: 'control_request', subtype: 'can_use_tool', request_id: 'r\n1', state: 'idle' } },
      { session_id: 'd', seq: 4, meta: { type: 'assistant' }, read_at_ms: 5, input_ack: 9 },
      { session_id: 'e', seq: 5, meta: {}, input_ack: 0 },
    ];
    for (const params of cases) {
      const header = BinaryHeaders['session.output'](params);
      expect(header).toBe(JSON.stringify({ method: 'session.output', params }));
      expect(BinaryNotifications['session.output'].parse(JSON.parse(header).params)).toEqual(params);
    }
  });
});

describe('the WebSocket layout of a binary frame', () => {
  it('round-trips any header and body; the decoded body is a view, not a copy', () => {
    const body = Buffer.from([0, 0xff, 0xc3, 0x28, 10, 13, 0x22, 0x5c]); // NUL, invalid UTF-8, newline, quote, backslash
    const frame: BinaryFrame = { header: '{"s":"é","q":1}', body };
    const wire = encodeBinaryFrame(frame);
    const back = decodeBinaryFrame(wire);
    expect(back.header).toBe(frame.header);
    expect(Buffer.from(back.body).equals(body)).toBe(true);
    expect(back.body.buffer).toBe(wire.buffer);
    expect(decodeBinaryFrame(encodeBinaryFrame({ header: '', body: Buffer.alloc(0) }))).toEqual({ header: '', body: Buffer.alloc(0) });
  });

  it('refuses a message shorter than its length prefix, or a header longer than the message or the cap', () => {
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        return (err as TetherError).code;
      }
      return 'no error';
    };
    expect(code(() => decodeBinaryFrame(Buffer.from([0, 0])))).toBe('INVALID_ARGUMENT');
    const lying = Buffer.alloc(10);
    lying.writeUInt32BE(7, 0);
    expect(code(() => decodeBinaryFrame(lying))).toBe('INVALID_ARGUMENT');
    const huge = Buffer.alloc(MAX_BINARY_HEADER_BYTES + 10);
    huge.writeUInt32BE(MAX_BINARY_HEADER_BYTES + 1, 0);
    expect(code(() => decodeBinaryFrame(huge))).toBe('INVALID_ARGUMENT');
  });
});

describe('a malformed binary message from a raw WebSocket peer', () => {
  let http: Server | undefined;
  afterEach(async () => {
    http?.closeAllConnections();
    await new Promise((r) => http?.close(r) ?? r(undefined));
    http = undefined;
  });

  it('closes that channel with INVALID_ARGUMENT', async () => {
    http = createServer();
    await new Promise<void>((resolve) => http!.listen(0, '127.0.0.1', resolve));
    let accepted!: (channel: Channel) => void;
    const channel = new Promise<Channel>((resolve) => (accepted = resolve));
    attachWsListener(http, { maxFrameBytes: 1024, onChannel: (c) => accepted(c) });
    const raw = new WebSocket(`ws://127.0.0.1:${(http.address() as AddressInfo).port}${WS_PATH}`);
    await bounded(new Promise((resolve, reject) => raw.once('open', resolve).once('error', reject)), 'raw socket open');
    raw.send(Buffer.from([0, 0, 0]), { binary: true });
    const info = await bounded((await bounded(channel, 'accepted')).closed, 'server closed');
    expect(info.code).toBe('INVALID_ARGUMENT');
    raw.terminate();
  });
});

describe('RpcPeer and binary notifications', () => {
  const output = (seq: number) => ({ session_id: 's1', seq, meta: { type: 'assistant' } });

  it('hands each to its handler with the body untouched, in arrival order with JSON-RPC notifications', async () => {
    const [a, b] = memoryChannelPair();
    const sender = new RpcPeer(a);
    const seen: string[] = [];
    const peer = new RpcPeer(b).onBinaryNotification('session.output', (p, body) =>
      seen.push(`bin:${p.seq}:${Buffer.from(body).toString('hex')}`),
    );
    peer.onNotification('session.ack', (p) => seen.push(`json:${p.seq}`));
    const run = peer.run();
    expect(sender.postBinary('session.output', output(1), Buffer.from([0x7b, 0x7d]))).toBe(true);
    await sender.notify('session.ack', { session_id: 's1', seq: 2 });
    expect(sender.postBinary('session.output', output(3), Buffer.from([0, 0xff]))).toBe(true);
    await a.send('{}'); // resolves once everything before it was handed over
    a.close();
    await bounded(run, 'peer ends');
    expect(seen).toEqual(['bin:1:7b7d', 'json:2', 'bin:3:00ff']);
  });

  it('drops binary frames with an unreadable header, unknown method or bad params and stays usable', async () => {
    const [a, b] = memoryChannelPair();
    const seen: number[] = [];
    const peer = new RpcPeer(b).onBinaryNotification('session.output', (p) => seen.push(p.seq));
    const run = peer.run();
    await a.send({ header: 'not json', body: Buffer.from('x') });
    await a.send({ header: JSON.stringify({ method: 'from.the.future', params: {} }), body: Buffer.from('x') });
    await a.send({
      header: JSON.stringify({ method: 'session.output', params: { session_id: 's1', seq: -1, meta: {} } }),
      body: Buffer.from('x'),
    });
    await a.send({ header: JSON.stringify({ method: 'session.output', params: output(7) }), body: Buffer.from('x') });
    a.close();
    await bounded(run, 'peer ends');
    expect(seen).toEqual([7]);
    await expect(b.closed).resolves.toMatchObject({ code: 'OK' });
  });
});
