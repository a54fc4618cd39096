#!/usr/bin/env node
/**
 * Syscalls per prompt round trip of the gateway and of the GatewayClient library (this
 * process): figure 1's round trip (our gateway and agent from dist/, the echo engine) after a
 * warm-up, with `strace -c -f` attached to both for COUNT round trips. Counts, unlike CPU time,
 * hold still on a loaded machine: they show a write or a wake-up taken off the path.
 *
 *   node bench/round-trip-syscalls.mjs [--count 3000]
 *
 * Needs strace (and ptrace allowed). Prints writev / write / read / epoll_pwait / futex per round
 * trip for each, and the mean wall time (strace slows every syscall it sees).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { argsOf } from './lib/child.mjs';
import { startChild, stopAll } from './lib/proc.mjs';
import { GatewayClient } from '../dist/client/gateway-client.js';
import { onEachAnswer, roundTrips, userLine } from './lib/prompt-round-trips.mjs';
import { helpAndExit } from './lib/usage.mjs';

helpAndExit(import.meta.url);

const a = argsOf();
const COUNT = Number(a.count ?? 3_000);
const WARMUP = 1_000;
const SHOWN = ['writev', 'write', 'read', 'epoll_pwait', 'epoll_wait', 'futex'];

/** Calls per round trip of each syscall in SHOWN, from strace -c's table. */
function perRoundTrip(file) {
  const out = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const cols = line.trim().split(/\s+/);
    const name = cols[cols.length - 1];
    if (cols.length >= 5 && /^\d/.test(cols[0]) && SHOWN.includes(name)) out[name] = Number((Number(cols[3]) / COUNT).toFixed(2));
  }
  return out;
}

const dir = mkdtempSync(join(tmpdir(), 'tether-syscalls-'));
const gateway = await startChild('tether-gateway.mjs', [], { label: 'gateway' });
const agent = await startChild('tether-agent.mjs', ['--gateway', gateway.info.url, '--name', 'bench-ws'], { label: 'agent' });
const client = await GatewayClient.connect({ gateway: gateway.info.url });
const traces = [];
try {
  const session = await client.createSession({ agent: 'bench-ws' });
  const setOnAnswer = onEachAnswer(session);
  const run = (n) => roundTrips(n, (i) => void session.send(userLine(i)).catch(() => {}), setOnAnswer);
  await run(WARMUP);
  for (const [pid, name] of [
    [gateway.pid, 'gateway'],
    [process.pid, 'client'],
  ]) {
    const proc = spawn('strace', ['-c', '-f', '-p', String(pid), '-o', join(dir, name)], { stdio: 'ignore' });
    traces.push({ name, proc, exited: new Promise((resolve) => proc.once('exit', resolve)) });
  }
  await new Promise((resolve) => setTimeout(resolve, 1_000)); // strace attaches to every thread
  const t0 = performance.now();
  await run(COUNT);
  const wall = ((performance.now() - t0) * 1000) / COUNT;
  for (const t of traces) t.proc.kill('SIGINT');
  await Promise.all(traces.map((t) => t.exited));
  console.log(`${COUNT} round trips under strace, wall ${wall.toFixed(0)} µs mean`);
  for (const t of traces) console.log(`${t.name.padEnd(8)} per round trip ${JSON.stringify(perRoundTrip(join(dir, t.name)))}`);
} finally {
  for (const t of traces) t.proc.kill('SIGKILL');
  await client.close().catch(() => {});
  await stopAll([agent, gateway]);
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
