/**
 * Rows of the threat model (threats.md, kept beside the project) parts 2B, 2D, 2G and 2H that no other suite covers, each
 * named by its row id. (Which rows are covered where is listed in the issue 6 closing note.)
 */
import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Agent } from '../agent/agent.js';
import type { ExitInfo } from '../agent/engine-process.js';
import type { EngineLine } from '../agent/line-splitter.js';
import { SessionRelay, type Outgoing } from '../agent/session-relay.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { LinkStatus } from '../core/link/link.js';
import { dial } from '../core/link/dial.js';
import { TetherError } from '../core/errors.js';
import { silentLogger } from '../core/logging.js';
import { PROTOCOL_VERSION } from '../core/protocol/version.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { Gateway } from '../gateway/gateway.js';
import { ReplayLog } from '../gateway/session/history/replay-log.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { makeTempDir } from './support/claude-cli.js';
import { processesIn } from './support/cli.js';
import { codeOf, isResult, until } from './support/items.js';
import { rawClient } from './support/raw-client.js';
import { record } from './support/recorder.js';
import type { RemoteSession } from '../client/remote-session.js';
import { startStack, withTimeout } from './support/stack.js';
import { waitFor, steady } from './support/wait.js';
import { WsFrameReader } from './support/ws-frames.js';
import { cleanupsPerTest } from './support/cleanups.js';

// ---- raw WebSocket, for the protocol rows ------------------------------------------------

/** One client frame, masked unless told otherwise. */
function wsFrame(opcode: number, payload: Buffer, o: { fin?: boolean; rsv?: number; mask?: boolean } = {}): Buffer {
  const fin = o.fin ?? true;
  const mask = o.mask ?? true;
  const head: number[] = [(fin ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | opcode];
  const len = payload.length;
  if (len < 126) head.push((mask ? 0x80 : 0) | len);
  else if (len < 65536) head.push((mask ? 0x80 : 0) | 126, len >> 8, len & 0xff);
  else {
    head.push((mask ? 0x80 : 0) | 127, 0, 0, 0, 0);
    head.push((len >>> 24) & 0xff, (len >>> 16) & 0xff, (len >>> 8) & 0xff, len & 0xff);
  }
  if (!mask) return Buffer.concat([Buffer.from(head), payload]);
  const key = Buffer.from([1, 2, 3, 4]);
  const body = Buffer.from(payload.map((b, i) => b ^ key[i % 4]));
  return Buffer.concat([Buffer.from(head), key, body]);
}

interface RawWs {
  socket: Socket;
  /** Resolves with the close code the server sent (0: closed without a close frame). */
  closed: Promise<number>;
}

/** Opens a WebSocket by hand (so it can send what no library would) and upgrades it. */
async function rawWs(port: number, token: string | undefined, extraHeaders = ''): Promise<RawWs> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await new Promise((r) => socket.once('connect', r));
  socket.write(
    `GET /v1/connect HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n` +
      `${token ? `Authorization: Bearer ${token}\r\n` : ''}${extraHeaders}\r\n`,
  );
  const reader = new WsFrameReader();
  let upgraded = false;
  let code = 0;
  const closed = new Promise<number>((resolve) => {
    socket.on('data', (d: Buffer) => {
      // Server frames are unmasked; pick out a close frame (opcode 8) and answer it.
      for (const f of reader.feed(d)) {
        if (f.opcode !== 8) continue;
        code = f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1005;
        socket.write(wsFrame(8, f.payload.subarray(0, 2)));
      }
      upgraded = reader.upgraded;
    });
    socket.on('close', () => resolve(code));
  });
  await waitFor(() => upgraded || socket.destroyed, 3_000, 'the upgrade');
  if (!upgraded) throw new Error('upgrade refused');
  return { socket, closed };
}

/** Sends a plain HTTP request by hand; resolves with the status line (or '' if the socket closed). */
function rawHttp(port: number, request: string): Promise<{ status: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => s.write(request));
    let got = '';
    s.on('data', (d) => {
      got += d.toString();
      if (got.includes('\r\n')) {
        resolve({ status: got.split('\r\n')[0], ms: Date.now() - started });
        s.destroy();
      }
    });
    s.on('error', () => {});
    s.on('close', () => resolve({ status: got.split('\r\n')[0] ?? '', ms: Date.now() - started }));
  });
}

// ---- a fake engine for the relay rows -------------------------------------------------

class FakeEngine {
  private queue: EngineLine[] = [];
  private waiter: (() => void) | undefined;
  writeError: TetherError | undefined;
  readonly exited = new Promise<ExitInfo>(() => {});
  push(n: number): void {
    for (let i = 0; i < n; i++) {
      const line = JSON.stringify({ type: 'assistant', i, pad: 'x'.repeat(200) });
      this.queue.push({ kind: 'frame', line, bytes: Buffer.from(line), value: JSON.parse(line) as Record<string, unknown> });
    }
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
  get unread(): number {
    return this.queue.length;
  }
  async *lines(): AsyncIterable<EngineLine> {
    for (;;) {
      const item = this.queue.shift();
      if (item) yield item;
      else await new Promise<void>((r) => (this.waiter = r));
    }
  }
  async write(): Promise<void> {
    if (this.writeError) throw this.writeError;
  }
}

function relayWith(engine: FakeEngine, maxUnackedBytes = 64 * 1024 * 1024) {
  const sent: Outgoing[] = [];
  const relay = new SessionRelay('s', engine, silentLogger, { maxUnackedBytes });
  relay.setSink({ send: (_id, item) => sent.push(item), ackInput: () => {} });
  return { relay, sent };
}

// ---- 2B. WebSocket protocol and transport ---------------------------------------------

describe('threats 2B: WebSocket protocol and transport', () => {
  const cleanups = cleanupsPerTest({ tolerant: true });

  /** A gateway with a small frame limit and a demo agent, auth off (the door is tested elsewhere). */
  async function smallGateway(maxFrameBytes: number): Promise<{ server: GatewayServer; agent: Agent }> {
    const cwd = makeTempDir('tether-cwd-');
    cleanups.push(() => cwd.cleanup());
    const server = await startGatewayServer(new Gateway(), { port: 0, grpcPort: 0, maxFrameBytes, auth: { verifier: 'off' } });
    cleanups.push(() => server.close());
    const agent = new Agent({
      gateway: server.url,
      name: 'b-agent',
      engine: 'demo',
      cwd: cwd.path,
      eofGraceMs: 500,
      termGraceMs: 500,
      dial: { maxFrameBytes },
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    return { server, agent };
  }

  it('B1: a message over maxPayload closes that connection with 1009 (RESOURCE_EXHAUSTED on gRPC); the session goes on and the client can come back', async () => {
    const limit = 64 * 1024;
    const { server } = await smallGateway(limit);
    const owner = await GatewayClient.connect({ gateway: server.url, dial: { maxFrameBytes: limit } });
    cleanups.push(() => owner.close());
    const session = await owner.createSession({ agent: 'b-agent' });
    const it = session[Symbol.asyncIterator]();

    // ws: one byte over the limit.
    const ws = new WebSocket(`${server.url}/v1/connect`, { maxPayload: 4 * limit });
    ws.on('error', () => {});
    await new Promise((r) => ws.once('open', r));
    const wsClosed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: {} }).padEnd(limit + 1, ' '));
    expect(await withTimeout(wsClosed, 3_000, 'the oversized ws message to be refused')).toBe(1009);

    // gRPC: a channel dialed with a larger limit of its own sends over the gateway's.
    const ch = await dial(server.grpcUrl!, { maxFrameBytes: 4 * limit });
    const peer = new RpcPeer(ch);
    void peer.run();
    await peer.request('hello', { protocol_version: PROTOCOL_VERSION, role: 'client' });
    await ch.send(JSON.stringify({ jsonrpc: '2.0', method: 'x', params: { pad: 'y'.repeat(limit + 10) } })).catch(() => {});
    const info = await withTimeout(ch.closed, 3_000, 'the oversized gRPC frame to be refused');
    expect(info.code).toBe('RESOURCE_EXHAUSTED');

    // Everyone else is unaffected, and the refused client may come back.
    await session.sendUserMessage('hello again');
    const result = (await until(it, isResult)) as { message: Record<string, unknown> };
    expect(result.message.is_error).toBe(false);
    const back = await GatewayClient.connect({ gateway: server.url, dial: { maxFrameBytes: limit } });
    cleanups.push(() => back.close());
    const again = await back.attach(session.id);
    expect(again.info.state).toBe('idle');
  });

  it('B2: permessage-deflate is never negotiated, even when the client offers it', async () => {
    const { server } = await smallGateway(1024 * 1024);
    const ws = new WebSocket(`${server.url}/v1/connect`, { perMessageDeflate: true });
    ws.on('error', () => {});
    await new Promise((r) => ws.once('open', r));
    expect(ws.extensions).toBe('');
    ws.terminate();
  });

  it('B3: thousands of tiny continuation frames are refused with 1008, memory bounded, gateway alive', async () => {
    const { server } = await smallGateway(1024 * 1024);
    const raw = await rawWs(server.port, undefined);
    const parts: Buffer[] = [wsFrame(1, Buffer.from('{'), { fin: false })];
    for (let i = 0; i < 20_000; i++) parts.push(wsFrame(0, Buffer.from(' '), { fin: false }));
    const before = process.memoryUsage().rss;
    raw.socket.write(Buffer.concat(parts));
    expect(await withTimeout(raw.closed, 5_000, 'the fragment flood to be refused')).toBe(1008);
    expect(process.memoryUsage().rss - before).toBeLessThan(50 * 1024 * 1024);
    const ok = await GatewayClient.connect({ gateway: server.url });
    cleanups.push(() => ok.close());
    expect(await ok.listAgents()).toHaveLength(1);
  });

  const violations: { name: string; bytes: () => Buffer; code: number }[] = [
    { name: 'unmasked client frame', bytes: () => wsFrame(1, Buffer.from('{}'), { mask: false }), code: 1002 },
    { name: 'RSV2 bit set', bytes: () => wsFrame(1, Buffer.from('{}'), { rsv: 2 }), code: 1002 },
    { name: 'RSV1 without deflate', bytes: () => wsFrame(1, Buffer.from('{}'), { rsv: 4 }), code: 1002 },
    { name: 'unknown opcode 0x3', bytes: () => wsFrame(3, Buffer.from('{}')), code: 1002 },
    { name: 'control frame over 125 bytes', bytes: () => wsFrame(9, Buffer.alloc(126, 1)), code: 1002 },
    { name: 'fragmented control frame', bytes: () => wsFrame(9, Buffer.from('hi'), { fin: false }), code: 1002 },
    { name: 'close with an invalid code (1004)', bytes: () => wsFrame(8, Buffer.from([0x03, 0xec])), code: 1002 },
    { name: 'continuation with nothing to continue', bytes: () => wsFrame(0, Buffer.from('x')), code: 1002 },
    { name: 'text frame that is not UTF-8', bytes: () => wsFrame(1, Buffer.from([0x22, 0xff, 0xfe, 0x22])), code: 1007 },
  ];

  it.each(violations)('B4: $name → close $code, no crash, no half-dead socket', async ({ bytes, code }) => {
    const { server } = await smallGateway(1024 * 1024);
    const raw = await rawWs(server.port, undefined);
    raw.socket.write(bytes());
    expect(await withTimeout(raw.closed, 5_000, 'the server to close the socket')).toBe(code);
    const ok = await GatewayClient.connect({ gateway: server.url });
    cleanups.push(() => ok.close());
    expect(await ok.listAgents()).toHaveLength(1);
  });

  it('B5: 2500 headers (Upgrade last) get 431, and the gateway stays up', async () => {
    const { server } = await smallGateway(1024 * 1024);
    const many = Array.from({ length: 2500 }, (_, i) => `X-Filler-${i}: v\r\n`).join('');
    const r = await rawHttp(
      server.port,
      `GET /v1/connect HTTP/1.1\r\nHost: x\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${many}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
    );
    expect(r.status).toMatch(/^HTTP\/1\.1 431/);
    const ok = await GatewayClient.connect({ gateway: server.url });
    cleanups.push(() => ok.close());
    expect(await ok.listAgents()).toHaveLength(1);
  });

  it('B6: 15 KB of spaces in Sec-WebSocket-Protocol and -Extensions is answered quickly', async () => {
    const { server } = await smallGateway(1024 * 1024);
    const upgrade = (header: string, padding: number) =>
      rawHttp(
        server.port,
        `GET /v1/connect HTTP/1.1\r\nHost: x\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${header}: a${' '.repeat(padding)},\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
      );
    for (const header of ['Sec-WebSocket-Protocol', 'Sec-WebSocket-Extensions']) {
      // The bound is relative to the same request without the padding, timed now on this
      // machine: a parser that is quadratic in the spaces takes seconds, far past it.
      const baselineMs = Math.max(...(await Promise.all([0, 0, 0].map(async () => (await upgrade(header, 1)).ms))));
      const r = await upgrade(header, 15_000);
      expect(r.status).toMatch(/^HTTP\/1\.1 (101|400)/);
      expect(r.ms).toBeLessThan(Math.max(250, 20 * baselineMs));
    }
  });

  it("B7: healthy links answer the gateway's heartbeat and stay up across many intervals (agent and client, ws and gRPC)", async () => {
    const stack = await startStack({ engine: 'demo', limits: { heartbeat: { intervalMs: 100, timeoutMs: 300 } } });
    cleanups.push(() => stack.stop());
    const statuses: LinkStatus['state'][] = [];
    const viaGrpc = await GatewayClient.connect({ gateway: stack.grpcUrl, token: stack.token, onStatus: (s) => statuses.push(s.state) });
    cleanups.push(() => viaGrpc.close());
    const viaWs = await GatewayClient.connect({ gateway: stack.wsUrl, token: stack.token, onStatus: (s) => statuses.push(s.state) });
    cleanups.push(() => viaWs.close());
    const agentStatuses: LinkStatus['state'][] = [];
    const agent = new Agent({
      gateway: stack.grpcUrl,
      name: 'hb-agent',
      token: await stack.mint({ kind: 'agent', sub: 'hb-agent' }),
      engine: 'demo',
      onStatus: (s) => agentStatuses.push(s.state),
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    // The window is counted in heartbeat rounds, not wall time: a busy machine only makes it longer.
    const clock = await rawClient(stack.wsUrl, stack.token);
    cleanups.push(() => clock.close());
    await waitFor(() => clock.pingsAnswered >= 12, 15_000, 'twelve heartbeat rounds');
    expect(statuses.filter((s) => s === 'down')).toEqual([]);
    expect(agentStatuses.filter((s) => s === 'down')).toEqual([]);
    expect((await viaGrpc.listAgents()).map((a) => a.name).sort()).toEqual(['hb-agent', 'test-agent']);
  });
});

// ---- 2D. Relay semantics ----------------------------------------------------------------

describe('threats 2D: sequence, ack, resume', () => {
  const cleanups = cleanupsPerTest();

  it('D2: resume beyond the last frame is INVALID_ARGUMENT, at the last + 1 is fine, before the buffer is an explicit gap (both edges ±1)', async () => {
    const stack = cleanups.own(await startStack({ engine: 'demo', limits: { replay: { maxFrames: 8, maxBytes: 8 * 1024 * 1024 } } }));
    const owner = await stack.client();
    // State frames (asked for: the agent sets no SDK switch by itself) make the turn longer than the window.
    const session = await owner.createSession({ agent: 'test-agent', options: { env: { CLAUDE_CODE_SDK_READS_SESSION_STATE: '1' } } });
    const it = session[Symbol.asyncIterator]();
    await session.sendUserMessage('fill the history');
    await until(it, isResult);
    // The frames that follow the result: the state goes back to idle last.
    await until(
      it,
      (i) => i.kind === 'engine' && JSON.parse(i.line).subtype === 'session_state_changed' && JSON.parse(i.line).state === 'idle',
      [],
      10_000,
      'the idle state after the result',
    );
    // Every attach adds a presence frame (within moments: presence is coalesced), so the window
    // is read again after each attach's own presence frame has reached it.
    const lastSeq = async () => (await owner.listSessions()).find((x) => x.id === session.id)!.last_seq;
    const recordAttached = async (s: RemoteSession) => {
      const rec = record(s);
      await waitFor(
        () => rec.items.some((i) => i.body.includes(`"client_id":${JSON.stringify(s.clientId)}`)),
        10_000,
        'its own presence frame',
      );
      return rec;
    };
    const last = await lastSeq();
    expect(last).toBeGreaterThan(8);
    const c = await stack.client();
    expect(await codeOf(c.attach(session.id, { fromSeq: last + 2, readOnly: true }))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(c.attach(session.id, { fromSeq: last + 1000, readOnly: true }))).toBe('INVALID_ARGUMENT');
    // At last + 1: nothing replayed, only what comes after.
    const atEnd = await recordAttached(await c.attach(session.id, { fromSeq: last + 1, readOnly: true }));
    // At the first held frame (the log holds the newest 8): history from there, no gap.
    const firstA = (await lastSeq()) - 8 + 1;
    const atFirst = await recordAttached(await (await stack.client()).attach(session.id, { fromSeq: firstA, readOnly: true }));
    // One before it: an explicit gap naming exactly the missing frame, then the history.
    const firstB = (await lastSeq()) - 8 + 1;
    const before = record(await (await stack.client()).attach(session.id, { fromSeq: firstB - 1, readOnly: true }));
    await waitFor(() => atFirst.items.length >= 1 && before.items.length >= 2, 10_000, 'both replays');
    expect(atFirst.items[0].seq).toBe(firstA);
    expect(atFirst.items.some((i) => i.seq === 0)).toBe(false);
    const gap = JSON.parse(before.items[0].body) as Record<string, unknown>;
    expect(before.items[0].seq).toBe(0);
    expect(gap).toMatchObject({ subtype: 'gap', from_seq: firstB - 1, to_seq: firstB - 1 });
    expect(before.items[1].seq).toBe(firstB);
    expect(atEnd.items.every((i) => i.seq > last)).toBe(true);
  });

  it('D5: an ack beyond what the agent sent is ignored; nothing is released, and a real ack still works', async () => {
    const engine = new FakeEngine();
    const { relay, sent } = relayWith(engine);
    engine.push(3);
    await waitFor(() => sent.length >= 3, 5_000, 'three lines sent');
    expect(sent.map((s) => s.seq)).toEqual([1, 2, 3]);
    for (const forged of [4, 5, 1_000_000, Number.MAX_SAFE_INTEGER]) relay.ack(forged);
    expect(relay.nextOutputSeq).toBe(1);
    expect(relay.drained).toBe(false);
    // A reconnect re-sends all three: nothing was released by the forged acks.
    const resent: number[] = [];
    relay.setSink({ send: (_id, item) => resent.push(item.seq), ackInput: () => {} });
    expect(resent).toEqual([1, 2, 3]);
    relay.ack(2);
    expect(relay.nextOutputSeq).toBe(3);
    relay.ack(3);
    expect(relay.drained).toBe(true);
  });

  it('D6: a full replay log evicts the oldest (a later resume gets a gap), while the agent never evicts: it stops reading the engine', async () => {
    const log = new ReplayLog({ maxFrames: 10_000, maxBytes: 64 * 1024 });
    for (let seq = 1; seq <= 200; seq++) log.append({ seq, bytes: Buffer.alloc(1024, 'x') });
    expect(log.firstSeq).toBeGreaterThan(1);
    let err: TetherError | undefined;
    try {
      log.since(1);
    } catch (e) {
      err = e as TetherError;
    }
    expect(err?.code).toBe('FAILED_PRECONDITION');
    expect(err?.details).toMatchObject({ gap: true, from_seq: 1, to_seq: log.firstSeq - 1 });
    expect(log.since(log.firstSeq)).toHaveLength(200 - log.firstSeq + 1);
    expect(log.since(201)).toEqual([]);
    expect(() => log.since(202)).toThrow(TetherError);

    const engine = new FakeEngine();
    const { relay, sent } = relayWith(engine, 8 * 1024);
    engine.push(200);
    await waitFor(() => sent.length > 0, 5_000, 'the relay to start sending');
    await steady(() => sent.length, 5_000, 'the relay to stop reading'); // what it sent holds still
    expect(engine.unread).toBeGreaterThan(100); // the engine waits on its pipe
    const held = sent.length;
    expect(held).toBeLessThan(50);
    // Each ack of all that was sent lets the relay read on, until the engine has nothing left.
    await waitFor(
      () => {
        relay.ack(sent.at(-1)!.seq);
        return engine.unread === 0 && relay.drained;
      },
      5_000,
      'every line sent and acked',
    );
    expect(sent.map((s) => s.seq)).toEqual(Array.from({ length: 200 }, (_, n) => n + 1));
  });

  it('D7: prompts from two clients racing get one total order, the same for every participant and for the engine', async () => {
    const stack = cleanups.own(await startStack({ engine: 'demo' }));
    const a = await stack.client();
    const session = await a.createSession({ agent: 'test-agent' });
    const b = await stack.client();
    const sb = await b.attach(session.id);
    const viewer = record(await (await stack.client()).attach(session.id, { readOnly: true }));
    const recA = record(session);
    const recB = record(sb);
    await Promise.all(
      Array.from({ length: 8 }, (_, n) => [session.sendUserMessage(`from a ${n}`), sb.sendUserMessage(`from b ${n}`)]).flat(),
    );
    const results = (r: typeof recA) => r.items.filter((i) => i.body.startsWith('{"type":"result"'));
    await waitFor(() => [recA, recB, viewer].every((r) => results(r).length === 16), 20_000, '16 results everywhere');
    const prompts = (r: typeof recA) =>
      r.items
        .filter((i) => i.body.includes('"subtype":"prompt"'))
        .map((i) => (JSON.parse(i.body) as { message: { content: string } }).message.content);
    expect(prompts(recB)).toEqual(prompts(recA));
    expect(prompts(viewer)).toEqual(prompts(recA));
    // The engine answered them in that order.
    const answered = results(recA).map((i) => String((JSON.parse(i.body) as { result: string }).result).replace(/^.*You said: /, ''));
    expect(answered).toEqual(prompts(recA));
  });
});

// ---- 2G. Engine process ---------------------------------------------------------------

describe('threats 2G: engine process', () => {
  const cleanups = cleanupsPerTest();

  it('G8: input to a dead engine is an explicit error: the relay reports INPUT_NOT_WRITTEN, and session.send after the exit is FAILED_PRECONDITION', async () => {
    // The relay: a write that fails becomes a sequenced engine_error event, never silence.
    const engine = new FakeEngine();
    const { relay, sent } = relayWith(engine);
    engine.writeError = new TetherError('FAILED_PRECONDITION', 'engine is not running');
    await relay.input(1, { type: 'user', message: { role: 'user', content: 'hello?' } });
    expect(sent).toEqual([
      expect.objectContaining({
        seq: 1,
        kind: 'event',
        event: expect.objectContaining({ subtype: 'engine_error', code: 'INPUT_NOT_WRITTEN' }),
      }),
    ]);

    // End to end: the engine is killed; the session ends with its exit; input is refused with a typed error.
    const cwd = makeTempDir('tether-cwd-');
    try {
      const stack = cleanups.own(await startStack({ engine: 'demo', cwd: cwd.path }));
      const client = await stack.client();
      const session = await client.createSession({ agent: 'test-agent' });
      const rec = record(session);
      const [pid] = processesIn(cwd.path, 'demo-engine/main.js');
      expect(pid).toBeGreaterThan(0);
      process.kill(pid, 'SIGKILL');
      expect(await withTimeout(rec.done, 10_000, 'the session to end')).toBeUndefined();
      const exited = JSON.parse(rec.items.at(-1)!.body) as Record<string, unknown>;
      expect(exited).toMatchObject({ subtype: 'exited', signal: 'SIGKILL' });
      expect(await codeOf(session.sendUserMessage('anyone there?'))).toBe('FAILED_PRECONDITION');
    } finally {
      cwd.cleanup();
    }
  });
});

// ---- 2H. Resource exhaustion ------------------------------------------------------------

describe('threats 2H: resource exhaustion', () => {
  const cleanups = cleanupsPerTest();

  it('H2: a principal past its session quota gets RESOURCE_EXHAUSTED; others are unaffected; stopping one frees a slot', async () => {
    const stack = cleanups.own(await startStack({ engine: 'demo', limits: { maxSessionsPerPrincipal: 2 } }));
    const alice = await stack.client();
    const one = await alice.createSession({ agent: 'test-agent' });
    await alice.createSession({ agent: 'test-agent' });
    expect(await codeOf(alice.createSession({ agent: 'test-agent' }))).toBe('RESOURCE_EXHAUSTED');
    const bob = await stack.client({ sub: 'bob' });
    await bob.createSession({ agent: 'test-agent' });
    await one.stop();
    await waitFor(
      async () => (await alice.listSessions()).find((s) => s.id === one.id)?.state === 'ended',
      10_000,
      'the stopped session to end',
    );
    const again = await alice.createSession({ agent: 'test-agent' });
    expect(again.role).toBe('owner');
  });

  it('H2: a session past its participant quota refuses one more attach with RESOURCE_EXHAUSTED; a member leaving frees the slot', async () => {
    const stack = cleanups.own(await startStack({ engine: 'demo', limits: { maxMembers: 2 } }));
    const owner = await stack.client();
    const session = await owner.createSession({ agent: 'test-agent' });
    const second = await stack.client();
    const s2 = await second.attach(session.id, { readOnly: true });
    const third = await stack.client();
    expect(await codeOf(third.attach(session.id, { readOnly: true }))).toBe('RESOURCE_EXHAUSTED');
    await second.detach(s2);
    expect((await third.attach(session.id, { readOnly: true })).role).toBe('viewer');
  });

  it('H3: runtime and dependency floors hold (Node ≥ 20.20.0, grpc-js ≥ 1.14, ws ≥ 8.23, jose ≥ 6.2), gRPC session memory is bounded, and a burst of opened-and-cancelled gRPC streams leaves the gateway serving', async () => {
    const atLeast = (v: string, floor: number[]) => {
      const parts = v.replace(/^v/, '').split('.').map(Number);
      for (let i = 0; i < floor.length; i++) if (parts[i] !== floor[i]) return parts[i] > floor[i];
      return true;
    };
    const { createRequire } = await import('node:module');
    const req = createRequire(import.meta.url);
    const versionOf = (pkg: string) => (req(`${pkg}/package.json`) as { version: string }).version;
    expect(atLeast(process.version, [20, 20, 0])).toBe(true);
    expect(atLeast(versionOf('@grpc/grpc-js'), [1, 14])).toBe(true);
    expect(atLeast(versionOf('ws'), [8, 23, 0])).toBe(true);
    expect(atLeast(versionOf('jose'), [6, 2])).toBe(true);
    const { grpcLinkOptions } = await import('../core/channel/grpc.js');
    expect(grpcLinkOptions({ maxFrameBytes: 1024 })['grpc-node.max_session_memory']).toBeGreaterThan(0);

    const stack = cleanups.own(await startStack({ engine: 'demo', auth: 'off' }));
    const opened = await Promise.all(Array.from({ length: 40 }, () => dial(stack!.grpcUrl, { connectTimeoutMs: 5_000 })));
    for (const ch of opened) ch.close('CANCELLED', 'rapid reset');
    const c = await GatewayClient.connect({ gateway: stack.grpcUrl });
    try {
      expect((await c.listAgents()).map((a) => a.name)).toEqual(['test-agent']);
    } finally {
      await c.close();
    }
  });
});
