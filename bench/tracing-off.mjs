#!/usr/bin/env node
/**
 * Does tracing, switched off, move the relay? (issue 35) Two builds side by side in one run:
 * this checkout's and an older one's (`--before DIR`, a checkout with its own `dist/`, e.g. a
 * `git worktree` of the commit before tracing, built with `npx tsc -p tsconfig.json`). Each runs
 * `tether up --auth off` with the stand-in engine (bench/echo-engine.mjs) and no OTEL_*
 * variables; one client of this build's library times round trips (a prompt in, its echo out)
 * against each in turn, the order alternating from round to round so the machine's noise hits
 * both alike. Prints p50/p99 per build (median over rounds) and the ratio this / before.
 *
 *   node bench/tracing-off.mjs --before /tmp/before [--rounds 7] [--iters 1000]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { helpAndExit } from './lib/usage.mjs';

helpAndExit(import.meta.url);

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] ? argv[i + 1] : dflt;
};
const BEFORE = opt('before');
const ROUNDS = Number(opt('rounds', '7'));
const ITERS = Number(opt('iters', '1000'));
const WARMUP = 100;
if (!BEFORE) {
  console.error('usage: node bench/tracing-off.mjs --before DIR [--rounds N] [--iters N]  (DIR: an older checkout with dist/ built)');
  process.exit(2);
}
const { GatewayClient } = await import(join(ROOT, 'dist/client/gateway-client.js'));
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));

/** `tether up` of the build at `root`; resolves with its URL and a stop function. */
async function up(root, dir) {
  const child = spawn(
    process.execPath,
    [
      join(root, 'dist/bin/tether.js'),
      'up',
      '--auth',
      'off',
      '--port',
      '0',
      '--engine',
      'claude',
      '--engine-command',
      join(ROOT, 'bench/echo-engine.mjs'),
      '--cwd',
      dir,
      '--state-dir',
      join(dir, 'state'),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  const url = await new Promise((ok, fail) => {
    const t = setTimeout(() => fail(new Error(`tether up (${root}) printed no gateway line in 30 s`)), 30_000);
    createInterface({ input: child.stdout }).on('line', (l) => l.startsWith('gateway: ') && (clearTimeout(t), ok(l.slice(9))));
    child.once('exit', (code) => fail(new Error(`tether up (${root}) exited ${code}`)));
  });
  const stop = () => new Promise((r) => (child.exitCode !== null ? r() : (child.once('exit', r), child.kill('SIGTERM'))));
  return { url, stop };
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
const median = (xs) => pct(xs, 50);

/** A session on the stack, and a function timing one round trip (µs). */
async function opened(url) {
  const client = await GatewayClient.connect({ gateway: url });
  let agents = [];
  for (let i = 0; i < 100 && !agents.length; i++) {
    agents = await client.listAgents();
    if (!agents.length) await new Promise((r) => setTimeout(r, 100));
  }
  const session = await client.createSession({ agent: agents[0].name });
  const items = session[Symbol.asyncIterator]();
  const trip = async () => {
    const t0 = process.hrtime.bigint();
    await session.sendUserMessage('ping');
    for (;;) {
      const { value } = await items.next();
      if (value?.kind === 'engine' && value.message?.type === 'assistant') break;
    }
    return Number(process.hrtime.bigint() - t0) / 1000;
  };
  return { trip, close: () => client.close() };
}

const dirs = [mkdtempSync(join(tmpdir(), 'tether-off-now-')), mkdtempSync(join(tmpdir(), 'tether-off-before-'))];
const stacks = { now: await up(ROOT, dirs[0]), before: await up(resolve(BEFORE), dirs[1]) };
const results = { now: { p50: [], p99: [] }, before: { p50: [], p99: [] } };
try {
  const sessions = { now: await opened(stacks.now.url), before: await opened(stacks.before.url) };
  for (const s of Object.values(sessions)) for (let i = 0; i < WARMUP; i++) await s.trip();
  for (let r = 0; r < ROUNDS; r++) {
    for (const which of r % 2 ? ['before', 'now'] : ['now', 'before']) {
      const times = [];
      for (let i = 0; i < ITERS; i++) times.push(await sessions[which].trip());
      results[which].p50.push(pct(times, 50));
      results[which].p99.push(pct(times, 99));
    }
  }
  for (const s of Object.values(sessions)) await s.close();
} finally {
  await Promise.all(Object.values(stacks).map((s) => s.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}
const row = (k) => {
  const n = median(results.now[k]);
  const b = median(results.before[k]);
  return `| round trip ${k}, µs | ${b.toFixed(0)} [${Math.min(...results.before[k]).toFixed(0)}–${Math.max(...results.before[k]).toFixed(0)}] | ${n.toFixed(0)} [${Math.min(...results.now[k]).toFixed(0)}–${Math.max(...results.now[k]).toFixed(0)}] | ${(n / b).toFixed(2)}× |`;
};
console.log(
  `tracing off, this build vs ${BEFORE}: ${ROUNDS} rounds × ${ITERS} round trips, WebSocket, tether up --auth off, stand-in engine`,
);
console.log('| figure | before | this build (tracing off) | this / before |');
console.log('|---|---|---|---|');
console.log(row('p50'));
console.log(row('p99'));
