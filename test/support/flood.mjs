// A connection flood against a gateway's WebSocket/HTTP port, run as its own process so the
// test's latency probe does not share an event loop with it (threats A17, B5, H1).
// Usage: node flood.mjs PORT RAW BAD_TOKENS
//   RAW connections from 127.0.0.2-127.0.0.9 that never finish a request (half send nothing,
//   half a partial header block), and BAD_TOKENS complete WebSocket upgrades with a bad bearer
//   token from 127.0.0.10. Prints one JSON summary line once the gateway closed everything
//   (or after 60 s).
import { connect } from 'node:net';

const [port, rawCount, badCount] = process.argv.slice(2).map(Number);
const BAD = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtYWxsb3J5In0.Zmxvb2Qtc2lnbmF0dXJlLXRoYXQtZG9lcy1ub3QtbWF0Y2g';
const t0 = Date.now();
const summary = {
  raw: { opened: 0, closedByGateway: 0, answered: {}, lastClosedMs: 0, errors: 0, stillOpen: { silent: 0, partial: 0 } },
  badTokens: { statuses: {}, lastAnsweredMs: 0 },
};
const open = new Set();
let pending = 0;
const done = () => {
  if (--pending > 0) return;
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exit(0);
};
const statusOf = (text) => (text.match(/^HTTP\/1\.1 (\d{3})/) ?? [null, 'none'])[1];

for (let i = 0; i < rawCount; i++) {
  pending++;
  const s = connect({ port, host: '127.0.0.1', localAddress: `127.0.0.${2 + (i % 8)}` });
  s.kind = i % 2 ? 'partial' : 'silent';
  open.add(s);
  let got = '';
  s.on('connect', () => {
    summary.raw.opened++;
    if (i % 2) s.write('GET /v1/connect HTTP/1.1\r\nHost: gateway\r\nUpgrade: websocket\r\n');
  });
  s.on('data', (d) => (got += d.toString()));
  s.on('error', () => summary.raw.errors++);
  s.on('close', () => {
    open.delete(s);
    summary.raw.closedByGateway++;
    const st = statusOf(got);
    summary.raw.answered[st] = (summary.raw.answered[st] ?? 0) + 1;
    summary.raw.lastClosedMs = Date.now() - t0;
    done();
  });
}
for (let i = 0; i < badCount; i++) {
  pending++;
  const s = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.10' });
  let got = '';
  s.on('connect', () =>
    s.write(
      `GET /v1/connect HTTP/1.1\r\nHost: gateway\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
        `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${BAD}\r\n\r\n`,
    ),
  );
  s.on('data', (d) => (got += d.toString()));
  s.on('error', () => {});
  s.on('close', () => {
    const st = statusOf(got);
    summary.badTokens.statuses[st] = (summary.badTokens.statuses[st] ?? 0) + 1;
    summary.badTokens.lastAnsweredMs = Date.now() - t0;
    done();
  });
}
setTimeout(() => {
  for (const s of open) summary.raw.stillOpen[s.kind]++;
  process.stdout.write(JSON.stringify({ ...summary, timedOut: true, pending }) + '\n');
  process.exit(0);
}, 60_000).unref();
