#!/usr/bin/env node
/**
 * CPU per prompt round trip of each process, in the steady state: figure 1's round trip
 * (one small user message, client → relay → agent → engine → back, one at a time) many times
 * over, after a warm-up, for the raw WebSocket relay and for ours (gateway + agent from dist/,
 * the GatewayClient library in this process), alternating. Longer and steadier than figure 1's
 * rounds, so a change of a few µs per round trip shows through a loaded machine.
 *
 *   node bench/round-trip-cpu.mjs [--count 10000] [--rounds 2] [--pin] [--transport ws|grpc] [--read] [--duties] [--stored]
 *
 * --transport: every hop over WebSocket (default) or gRPC, the raw relays' and ours alike.
 *
 * --pin: every process (this one included, engines too) on CPU 0, as figure 1's pinned rounds;
 * run it under `taskset -c 0` for this process. Prints CPU µs per round trip of relay, agent
 * and client, and the mean wall time per round trip.
 *
 * --read: also the raw relay and agent in their reading mode (raw-relay.mjs --read): what a
 * relay that parses, checks, numbers and keeps every frame costs on the same libraries, with
 * no code of ours; its client parses each frame. The round trip's floor for any relay that reads.
 *
 * --duties: also the raw relay and agent doing a prompt's duties besides reading (raw-relay.mjs
 * --duties: the input checks, the uuid stamp and its author kept, an audit record, the echo):
 * the round trip's floor for any relay that does what the gateway must do for a prompt.
 *
 * --stored: also ours with the gateway keeping its state on disk as `tether gateway` does
 * (file session store, the audit trail flushed with fdatasync per record, usage ledger; a
 * fresh folder under the system's temp folder), row "disk": what a prompt costs in production
 * beside the in-memory stores every other figure uses.
 *
 * --profile DIR: ours only (with --stored: the gateway keeping its state on disk), once, with
 * the gateway and the agent under --cpu-prof (profiles in DIR); prints each one's top functions
 * (bench/lib/profile.mjs).
 */
import { WebSocket } from 'ws';
import { argsOf } from './lib/child.mjs';
import { startChild, stopAll } from './lib/proc.mjs';
import { openRawGrpc } from './lib/raw-grpc.mjs';
import { GatewayClient } from '../dist/client/gateway-client.js';
import { onEachAnswer, roundTrips, userLine } from './lib/prompt-round-trips.mjs';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { analyzeProfile } from './lib/profile.mjs';
import { helpAndExit } from './lib/usage.mjs';

helpAndExit(import.meta.url);

const a = argsOf();
const COUNT = Number(a.count ?? 10_000);
const WARMUP = 2_000;
const pin = a.pin === true;
/** Every hop's transport: ws (default) or grpc. */
const TRANSPORT = a.transport ?? 'ws';
if (TRANSPORT !== 'ws' && TRANSPORT !== 'grpc') throw new Error(`--transport ${TRANSPORT}: ws or grpc`);
const PROFILE = typeof a.profile === 'string' ? resolve(a.profile) : undefined;
const profArgs = (name) => (PROFILE ? ['--cpu-prof', '--cpu-prof-dir', join(PROFILE, name)] : []);
/** An engine's assistant line, by its first bytes (what figure 1's clients look at). */
const isAnswer = (b) => b[9] === 0x61 && b[10] === 0x73;

/** Warm-up, then COUNT round trips with the CPU of relay, agent and this process measured. */
async function measure(name, relay, agent, send, setOnAnswer) {
  await roundTrips(WARMUP, send, setOnAnswer);
  const cpu = async () => [(await relay.call('cpu')).total, (await agent.call('cpu')).total, process.cpuUsage()];
  const [r0, a0, c0] = await cpu();
  const t0 = performance.now();
  await roundTrips(COUNT, send, setOnAnswer);
  const wall = performance.now() - t0;
  const [r1, a1] = await cpu();
  const c = process.cpuUsage(c0);
  const per = (x) => (x / COUNT).toFixed(1).padStart(6);
  console.log(
    `${name.padEnd(5)} relay ${per(r1 - r0)}  agent ${per(a1 - a0)}  client ${per(c.user + c.system)} µs CPU per round trip; wall ${per(wall * 1000)} µs (mean)`,
  );
}

/** A client of the raw relay over TRANSPORT: `send(text)`, `onMessage(handler)`, `close()`. */
async function rawClient(url) {
  if (TRANSPORT === 'grpc') {
    const { call, close } = await openRawGrpc(url, 'client');
    return { send: (text) => call.write(Buffer.from(text)), onMessage: (f) => call.on('data', f), close };
  }
  const ws = new WebSocket(`${url}/client`, { perMessageDeflate: false });
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  return { send: (text) => ws.send(text), onMessage: (f) => ws.on('message', f), close: () => ws.terminate() };
}

/** The raw relay, or its reading mode (`reading`: 'read' or 'duties', as --read and --duties), with a client of the same kind. */
async function raw(reading = undefined) {
  const args = ['--transport', TRANSPORT, ...(reading ? [`--${reading}`] : [])];
  const started = [];
  let client;
  try {
    const relay = await startChild('raw-relay.mjs', args, { pin, label: 'raw-relay' });
    started.push(relay);
    const agent = await startChild('raw-agent.mjs', [...args, '--url', relay.info.url], { pin, label: 'raw-agent' });
    started.push(agent);
    client = await rawClient(relay.info.url);
    let onAnswer = () => {};
    if (reading) client.onMessage((b) => JSON.parse(b).line?.type === 'assistant' && onAnswer());
    else client.onMessage((b) => isAnswer(b) && onAnswer());
    await measure(
      reading ?? 'raw',
      relay,
      agent,
      reading ? (i) => client.send(JSON.stringify({ line: userLine(i) })) : (i) => client.send(JSON.stringify(userLine(i))),
      (f) => (onAnswer = f),
    );
  } finally {
    client?.close();
    await stopAll(started.reverse());
  }
}

/** Ours; `stored`: the gateway keeping its state on disk as `tether gateway` does (--state, a fresh folder removed after). */
async function ours(stored = false) {
  const state = stored ? mkdtempSync(join(tmpdir(), 'tether-bench-state-')) : undefined;
  const started = [];
  let client;
  try {
    const gateway = await startChild('tether-gateway.mjs', state ? ['--state', state] : [], {
      pin,
      label: 'gateway',
      execArgv: profArgs('gateway'),
    });
    started.push(gateway);
    const url = TRANSPORT === 'grpc' ? gateway.info.grpcUrl : gateway.info.url;
    const agent = await startChild('tether-agent.mjs', ['--gateway', url, '--name', 'bench-ws'], {
      pin,
      label: 'agent',
      execArgv: profArgs('agent'),
    });
    started.push(agent);
    client = await GatewayClient.connect({ gateway: url });
    const session = await client.createSession({ agent: 'bench-ws' });
    await measure(stored ? 'disk' : 'ours', gateway, agent, (i) => void session.send(userLine(i)).catch(() => {}), onEachAnswer(session));
  } finally {
    await client?.close().catch(() => {});
    await stopAll(started.reverse());
    if (state) rmSync(state, { recursive: true, force: true });
  }
}

if (PROFILE) {
  await ours(a.stored === true);
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  for (const name of ['gateway', 'agent']) {
    const dir = join(PROFILE, name);
    mkdirSync(dir, { recursive: true });
    const file = readdirSync(dir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .sort()
      .at(-1);
    if (!file) continue;
    const p = analyzeProfile(join(dir, file), root);
    console.log(`\n${name}: busy ${p.busyMs} ms (${join(dir, file)})`);
    for (const [title, rows] of [
      ['self', p.topSelf],
      ['ours, inclusive', p.oursInclusive],
    ]) {
      console.log(`  ${title}:`);
      for (const r of rows) console.log(`    ${String(r.pct).padStart(5)} %  ${r.name}`);
    }
  }
} else {
  for (let r = 0; r < Number(a.rounds ?? 2); r++) {
    await raw();
    if (a.read === true) await raw('read');
    if (a.duties === true) await raw('duties');
    await ours();
    if (a.stored === true) await ours(true);
  }
}
process.exit(0);
