/**
 * The door under floods (threats A17, B5, H1): connection caps per gateway and per address on
 * both listeners, failed authentications rate-limited per address (refused unread, counted,
 * logged without the token), and deadlines that close garbage, slowloris and half-open
 * connections.
 */
import { connect as tcpConnect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import { generateTokenKey } from '../core/auth/keygen.js';
import { mintToken } from '../core/auth/mint.js';
import { TokenVerifier } from '../core/auth/verify.js';
import { dial } from '../core/link/dial.js';
import { createLogger } from '../core/logging.js';
import { addressOf, AuthFailureLimiter, ConnectionLimiter, DOOR_DEFAULTS, type DoorLimits } from '../gateway/door/door-limits.js';
import { Gateway, type GatewayLimits } from '../gateway/gateway.js';
import { startGatewayServer } from '../gateway/server.js';
import { eventually, scrape } from './support/metrics.js';
import { withTimeout } from './support/stack.js';
import { cleanupsPerTest } from './support/cleanups.js';

const key = generateTokenKey('HS256').key;
const BAD_TOKEN = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtYWxsb3J5In0.c2VjcmV0LXNpZ25hdHVyZS10aGF0LWRvZXMtbm90LW1hdGNo';

describe('door limits (unit)', () => {
  it('caps connections per gateway and per address, and releases each once', () => {
    const l = new ConnectionLimiter({ maxConnections: 3, maxConnectionsPerAddress: 2 });
    const a1 = l.acquire('10.0.0.1');
    l.acquire('10.0.0.1');
    expect(() => l.acquire('10.0.0.1')).toThrow(expect.objectContaining({ code: 'RESOURCE_EXHAUSTED' }));
    l.acquire('10.0.0.2');
    expect(() => l.acquire('10.0.0.3')).toThrow(/gateway connection limit reached \(3\)/);
    a1();
    a1(); // idempotent
    expect(l.open).toBe(2);
    l.acquire('10.0.0.1');
    expect(l.open).toBe(3);
  });

  it('refuses an address that spent its burst of failures, refills at the rate, and forgets full buckets', () => {
    let now = 0;
    const l = new AuthFailureLimiter({ authFailuresPerMinute: 20, authFailureBurst: 40 }, () => now);
    for (let i = 0; i < 39; i++) expect(l.take('1.2.3.4').exhausted).toBe(false);
    l.take('5.6.7.8').refund(); // a good credential costs nothing
    expect(l.take('1.2.3.4').exhausted).toBe(true); // the 40th: refused from now on
    expect(() => l.take('1.2.3.4')).toThrow(expect.objectContaining({ code: 'RESOURCE_EXHAUSTED', details: { reason: 'rate_limited' } }));
    for (let i = 0; i < 40; i++) l.take('5.6.7.8').refund(); // other addresses are not affected, good ones never run out
    now += 2_999;
    expect(() => l.take('1.2.3.4')).toThrow(/retry in 1 s/);
    now += 1; // 20 a minute: one every 3 s
    expect(l.take('1.2.3.4').exhausted).toBe(true);
    now += 10 * 60_000;
    expect(l.take('1.2.3.4').exhausted).toBe(false);
  });

  it('reads the address out of every remote form the listeners report', () => {
    expect(addressOf('127.0.0.1:5000')).toBe('127.0.0.1');
    expect(addressOf('[::1]:5000')).toBe('::1');
    expect(addressOf('ipv4:10.1.2.3:443')).toBe('10.1.2.3');
    expect(addressOf('ipv6:[fe80::1]:443')).toBe('fe80::1');
    expect(addressOf('[::ffff:127.0.0.1]:80')).toBe('127.0.0.1');
    expect(addressOf('::ffff:127.0.0.1')).toBe('127.0.0.1');
  });
});

const cleanups = cleanupsPerTest();

async function start(door: Partial<DoorLimits>, limits: Partial<GatewayLimits> = {}, logLines?: string[]) {
  const logger = logLines ? createLogger({ level: 'debug', destination: { write: (s: string) => void logLines.push(s) } }) : undefined;
  return cleanups.own(
    await startGatewayServer(new Gateway({ limits, logger }), {
      port: 0,
      grpcPort: 0,
      logger,
      doorLimits: door,
      auth: { verifier: new TokenVerifier({ keys: [key] }) },
    }),
  );
}

/** A raw TCP connection from `localAddress` (any 127.x address on Linux), with what it received and when it closed. */
function raw(port: number, localAddress = '127.0.0.1', send?: string) {
  const s = tcpConnect({ port, host: '127.0.0.1', localAddress });
  cleanups.push(() => s.destroy());
  let received = '';
  s.on('data', (d) => (received += d.toString()));
  s.on('error', () => {});
  const connected = new Promise<void>((r) => s.once('connect', () => r()));
  const closed = new Promise<number>((r) => s.once('close', () => r(Date.now())));
  if (send !== undefined) void connected.then(() => s.write(send));
  return { socket: s, connected, closed, received: () => received };
}

/** A WebSocket upgrade request with a bearer token, as raw HTTP. */
const upgrade = (token: string) =>
  `GET /v1/connect HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${token}\r\n\r\n`;

/** The status line of a raw HTTP exchange once the server has closed it. */
async function statusOf(port: number, request: string, localAddress?: string): Promise<string> {
  const c = raw(port, localAddress, request);
  await withTimeout(c.closed, 5_000, 'the refusal');
  return c.received().split('\r\n')[0];
}

describe('failed authentications per address (A17)', () => {
  it('WebSocket: 401 until the burst is spent, then 429 before the token is read; other addresses unaffected; counted; no token in the log', async () => {
    const lines: string[] = [];
    const s = await start({ authFailureBurst: 5, authFailuresPerMinute: 20 }, {}, lines);
    for (let i = 0; i < 5; i++) expect(await statusOf(s.port, upgrade(BAD_TOKEN), '127.0.0.7')).toBe('HTTP/1.1 401 Unauthorized');
    expect(await statusOf(s.port, upgrade(BAD_TOKEN), '127.0.0.7')).toBe('HTTP/1.1 429 Too Many Requests');
    // While it lasts, even a good token from that address is refused unread (the Teleport model).
    const good = await mintToken({ key, kind: 'client', sub: 'alice', ttlSeconds: 60 });
    expect(await statusOf(s.port, upgrade(good), '127.0.0.7')).toBe('HTTP/1.1 429 Too Many Requests');
    // Another address is not affected.
    const ok = await GatewayClient.connect({ gateway: s.url, token: good, reconnect: false });
    await ok.close();
    expect((await scrape(s.port)).get('tether_auth_failures_total{reason="rate_limited"}')).toBe(2);
    expect(lines.some((l) => l.includes('"event":"auth.rate_limited"'))).toBe(true);
    expect(lines.join('\n')).not.toContain(BAD_TOKEN.split('.')[2]);
    expect(lines.join('\n')).not.toContain(good.split('.')[2]);
  });

  it('gRPC: UNAUTHENTICATED until the burst is spent, then RESOURCE_EXHAUSTED', async () => {
    const s = await start({ authFailureBurst: 3, authFailuresPerMinute: 20 });
    for (let i = 0; i < 3; i++) await expect(dial(s.grpcUrl!, { token: BAD_TOKEN })).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(dial(s.grpcUrl!, { token: BAD_TOKEN })).rejects.toMatchObject({
      code: 'RESOURCE_EXHAUSTED',
      message: expect.stringContaining('too many failed authentications'),
    });
    // The limit is per address, shared by both listeners: the WebSocket door refuses too.
    expect(await statusOf(s.port, upgrade(BAD_TOKEN))).toBe('HTTP/1.1 429 Too Many Requests');
  });
});

describe('connection caps (H1)', () => {
  it('WebSocket port: past the per-address cap a connection gets 503 at once; other addresses and released slots get in', async () => {
    const s = await start({ maxConnectionsPerAddress: 3 });
    const held = [raw(s.port, '127.0.0.5'), raw(s.port, '127.0.0.5'), raw(s.port, '127.0.0.5')];
    await Promise.all(held.map((h) => h.connected));
    const refused = raw(s.port, '127.0.0.5');
    await withTimeout(refused.closed, 2_000, 'the refusal at the cap');
    expect(refused.received()).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(refused.received()).toContain('Retry-After: 1');
    expect(refused.received()).toContain('too many connections from this address (limit 3)');
    const other = raw(s.port, '127.0.0.6', 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await withTimeout(other.closed, 2_000, 'healthz');
    expect(other.received()).toMatch(/^HTTP\/1\.1 200/);
    held[0].socket.destroy();
    await held[0].closed;
    const again = raw(s.port, '127.0.0.5', 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await withTimeout(again.closed, 2_000, 'healthz after a slot freed');
    expect(again.received()).toMatch(/^HTTP\/1\.1 200/);
    expect((await scrape(s.port)).get('tether_connections_refused_total{transport="ws"}')).toBe(1);
  });

  it('gRPC port: the gateway-wide cap counts both listeners; a dial past it fails UNAVAILABLE (retryable), and succeeds once a slot frees', async () => {
    const s = await start({ maxConnections: 3 });
    const token = await mintToken({ key, kind: 'client', sub: 'alice', ttlSeconds: 60 });
    const held = [raw(s.port), raw(s.grpcPort!), raw(s.grpcPort!)];
    await Promise.all(held.map((h) => h.connected));
    await expect(dial(s.grpcUrl!, { token, connectTimeoutMs: 1_500 })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    held[1].socket.destroy();
    await held[1].closed;
    const ch = await dial(s.grpcUrl!, { token });
    // Full again: an HTTP request is one connection too many, and gets 503 with the reason.
    const res = await fetch(`http://127.0.0.1:${s.port}/healthz`, { signal: AbortSignal.timeout(5_000) });
    expect(res.status).toBe(503);
    expect(await res.text()).toBe('gateway connection limit reached (3); retry later');
    ch.close();
    await eventually(
      () => scrape(s.port).catch(() => undefined),
      (m) => (m?.get('tether_connections_refused_total{transport="grpc"}') ?? 0) >= 1,
      'the gRPC refusals counted',
    );
  });
});

describe('deadlines for garbage, slowloris and half-open connections (B5)', () => {
  it('closes a connection that sends nothing, one that sends its headers a byte at a time, and garbage', async () => {
    const s = await start({ headersTimeoutMs: 1_000 });
    const t0 = Date.now();
    const silent = raw(s.port);
    const slow = raw(s.port);
    await slow.connected;
    const request = upgrade(BAD_TOKEN);
    let i = 0;
    const drip = setInterval(() => !slow.socket.destroyed && i < request.length - 4 && slow.socket.write(request[i++]), 200);
    const garbage = raw(s.port, undefined, '\x16\x03\x01\x02\x00garbage that is no HTTP\r\n\r\n');
    const grpcGarbage = raw(s.grpcPort!, undefined, 'GET / HTTP/1.1\r\n\r\n');
    try {
      const [silentAt, slowAt] = await withTimeout(Promise.all([silent.closed, slow.closed]), 5_000, 'the header deadline');
      expect(silentAt - t0).toBeLessThan(5_000);
      expect(slowAt - t0).toBeGreaterThanOrEqual(900);
      expect(slow.received()).toMatch(/^HTTP\/1\.1 408/);
      await withTimeout(Promise.all([garbage.closed, grpcGarbage.closed]), 2_000, 'garbage closed');
      expect(garbage.received()).toMatch(/^HTTP\/1\.1 400/);
    } finally {
      clearInterval(drip);
    }
    expect(s.readiness().ready).toBe(true);
  });

  it('closes an authenticated WebSocket that never says hello (DEADLINE_EXCEEDED)', async () => {
    const s = await start({}, { helloTimeoutMs: 300 });
    const token = await mintToken({ key, kind: 'client', sub: 'alice', ttlSeconds: 60 });
    const ch = await dial(s.url, { token });
    const info = await withTimeout(ch.closed, 3_000, 'the hello deadline');
    expect(info.code).toBe('DEADLINE_EXCEEDED');
    expect(info.reason).toContain('no hello within 300 ms');
  });

  it('has the documented defaults', () => {
    expect(DOOR_DEFAULTS).toEqual({
      maxConnections: 10_000,
      maxConnectionsPerAddress: 512,
      authFailuresPerMinute: 20,
      authFailureBurst: 40,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
    });
  });
});
