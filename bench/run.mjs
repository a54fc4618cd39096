#!/usr/bin/env node
/**
 * Tether benchmarks: every figure next to a baseline measured in the same run.
 *
 *   npm run bench                 full run (< 15 min)
 *   npm run bench -- --quick      smaller counts, fewer rounds (< 2 min)
 *   options: --only 1,2,…,10 (figures; 1 and 2 share their processes; 5 and 8 need nats-server; 6 is the web page, needs chromium:
 *            bench/web.mjs; 7–10 are the lifecycle figures: bench/lifecycle.mjs)
 *            --profile (CPU profiles of the gateway, the agent and the driver under load, top functions)
 *            --profiles <words> (with --profile: only the profiles whose name has one of the comma-separated words, no levers)
 *            --profile-pinned (with --profile: every profiled process pinned to CPU 0)
 *            --out <file.json> (default bench/results/latest.json; the table goes next to it as .md)
 *            --budget <seconds> (the time budget: default 105 quick, 840 full; a hard stop at 1.3× it)
 *            --report <file.json> (re-render the tables of an earlier run, nothing is measured)
 *
 * Everything runs on 127.0.0.1 in child processes this script starts and stops: our gateway
 * and agent (from dist/, so `npm run build` first), the raw relays and raw agent of the
 * baselines, the stand-in engine (bench/echo-engine.mjs), and one driver process holding
 * every client. Figures are repeated in rounds; within a round the baseline and ours run
 * back to back, in alternating order, so noise on the shared machine hits both alike. The
 * table shows medians over rounds with [min–max] and the ratio ours / baseline. A run that
 * reaches its time limit writes what it measured, marked incomplete.
 */
import { execSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { connect } from 'node:net';
import { ALL_CPUS, BENCH_DIR, hasTaskset, liveCount, setAffinity, startChild, stopAll } from './lib/proc.mjs';
import { analyzeProfile } from './lib/profile.mjs';
import { report } from './lib/report.mjs';
import { natsServerBinary, startNats } from './lib/nats.mjs';
import { webFigure } from './web.mjs';
import { LIFECYCLE_COUNTS, lifecycleSteps } from './lifecycle.mjs';
import { helpAndExit } from './lib/usage.mjs';

helpAndExit(import.meta.url);

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(`--${name}`);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] && !argv[i + 1].startsWith('--') ? argv[i + 1] : dflt;
};
const QUICK = flag('quick');
// --quick alone runs figures 1–6 (under 2 min); the lifecycle figures add ~2 min: --quick --only 7,8,9,10.
const ONLY = new Set(
  opt('only', QUICK ? '1,2,3,4,5,6' : '1,2,3,4,5,6,7,8,9,10')
    .split(',')
    .map(Number),
);
const PROFILE = flag('profile');
const ROOT = join(BENCH_DIR, '..');
const OUT = opt('out', join(BENCH_DIR, 'results', 'latest.json'));
// quick: + ~10 s of `npm run build` stays under 2 min; `--budget <s>` sets another (a shorter one shows what a cut run writes)
const BUDGET_MS = Number(opt('budget', 0)) * 1000 || (QUICK ? 105_000 : 14 * 60_000);

if (!existsSync(join(ROOT, 'dist', 'gateway', 'gateway.js'))) {
  console.error('dist/ is missing: run `npm run build` first');
  process.exit(2);
}

const C = QUICK
  ? {
      latency: { rounds: 2, iters: 300, warmup: 50 },
      throughput: { rounds: 2, small: 8_000, large: 250 },
      fanout: { rounds: 1, ns: [1, 10, 100, 1000], deliveries: 30_000, rate: 20, rateSeconds: 1 },
      slow: { rounds: 1, n: 20, count: 1_000, rateSeconds: 1 },
      // Idle figures read after 1 s instead of 10 (IDLE_SETTLE_MS): a smoke check of figure 4 that fits the 2 minutes.
      idle: { clients: [1000], grpcClients: [500], sessions: [1000], agentSessions: 100, perSession: 100, settleMs: 1_000 },
      cluster: { rounds: 1, ns: [30, 300] },
    }
  : {
      latency: { rounds: 7, iters: 1000, warmup: 100 },
      throughput: { rounds: 5, small: 30_000, large: 1_000 },
      fanout: { rounds: 3, roundsAt1000: 2, ns: [1, 10, 100, 1000], deliveries: 150_000, rate: 20, rateSeconds: 5 },
      slow: { rounds: 3, n: 100, count: 2_000, rateSeconds: 3 },
      idle: { clients: [1000, 10000], grpcClients: [1000], sessions: [1000, 10000], agentSessions: 500, perSession: 100, settleMs: 10_000 },
      cluster: { rounds: 3, ns: [30, 300, 900] },
    };
Object.assign(C, LIFECYCLE_COUNTS[QUICK ? 'quick' : 'full']);

const started = Date.now();
const elapsed = () => ((Date.now() - started) / 1000).toFixed(1);
const log = (...a) => console.log(`[${elapsed()}s]`, ...a);
/** True once the budget is used; asked only before starting more work, so a true answer means the run was cut short. */
const overBudget = () => {
  if (Date.now() - started <= BUDGET_MS) return false;
  results.incomplete ??= 'time budget used up';
  return true;
};
const results = {
  started: new Date().toISOString(),
  mode: QUICK ? 'quick' : 'full',
  machine: machineInfo(),
  config: C,
  figures: {},
  notes: [],
};

function machineInfo() {
  const v = (p) => {
    try {
      return JSON.parse(readFileSync(join(ROOT, 'node_modules', p, 'package.json'), 'utf8')).version;
    } catch {
      return undefined;
    }
  };
  let rev;
  try {
    rev = execSync('git rev-parse --short HEAD', { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    rev = undefined;
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    memGiB: +(totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    ws: v('ws'),
    grpc: v('@grpc/grpc-js'),
    bufferutil: v('bufferutil') ?? 'absent',
    taskset: hasTaskset,
    gitRev: rev,
  };
}

async function sshAvailable() {
  const port22 = await new Promise((resolve) => {
    const s = connect(22, '127.0.0.1');
    const t = setTimeout(() => (s.destroy(), resolve(false)), 1_000);
    s.once('connect', () => (clearTimeout(t), s.destroy(), resolve(true)));
    s.once('error', () => (clearTimeout(t), resolve(false)));
  });
  if (!port22) return { ok: false, why: 'no sshd listening on 127.0.0.1:22' };
  try {
    execSync('ssh -o BatchMode=yes -o ConnectTimeout=3 127.0.0.1 true', { stdio: 'ignore', timeout: 8_000 });
    return { ok: true };
  } catch {
    return { ok: false, why: 'sshd present but non-interactive login to 127.0.0.1 failed' };
  }
}

// ---- stacks ------------------------------------------------------------------------------

/** Our gateway + one agent per transport (the agent dials over the transport it serves). */
async function startOurs({ pin = false, transports = ['ws', 'grpc'], engine, prof, env = {}, label = '', gatewayArgs = [] } = {}) {
  const profArgs = (sub) => (prof ? ['--cpu-prof', `--cpu-prof-dir=${join(prof, sub)}`] : []);
  const gw = await startChild('tether-gateway.mjs', gatewayArgs, { pin, execArgv: profArgs('gateway'), env, label: `${label}gateway` });
  const agents = {};
  for (const t of transports) {
    const url = t === 'ws' ? gw.info.url : gw.info.grpcUrl;
    agents[t] = await startChild('tether-agent.mjs', ['--gateway', url, '--name', `bench-${t}`, ...(engine ? ['--engine', engine] : [])], {
      pin,
      execArgv: profArgs(`agent-${t}`),
      env,
      label: `${label}agent-${t}`,
    });
  }
  return { gw, agents, url: { ws: gw.info.url, grpc: gw.info.grpcUrl }, stop: () => stopAll([...Object.values(agents), gw]) };
}

/**
 * Three of our gateways on one NATS server (JetStream), as `tether gateway --cluster` runs
 * them, and one agent given all three URLs (it registers with the first).
 */
async function startCluster({ gateways = 3 } = {}) {
  const nats = await startNats();
  const gws = [];
  try {
    const secret = randomBytes(32).toString('hex'); // the gateways' shared key, as --key gives it
    for (let i = 0; i < gateways; i++)
      gws.push(await startChild('tether-gateway.mjs', ['--cluster', nats.url, '--cluster-secret', secret], { label: `gateway-${i + 1}` }));
    const urls = gws.map((g) => g.info.url);
    const agent = await startChild('tether-agent.mjs', ['--gateway', urls.join(','), '--name', 'bench-ws'], { label: 'agent-ws' });
    return { gateways: gws, nats, urls, stop: () => stopAll([agent, ...gws]).finally(() => nats.stop()) };
  } catch (err) {
    await stopAll(gws);
    await nats.stop();
    throw err;
  }
}

/**
 * The raw relay and raw agent of one transport; `mode`: 'read' or 'duties' for their reading
 * mode (raw-relay.mjs --read) or that mode doing a prompt's duties too (--duties).
 */
async function startRaw(transport, { pin = false, mode: m = undefined } = {}) {
  const mode = m ? [`--${m}`] : [];
  const label = `${m ?? 'raw'}-%s-${transport}`;
  const relay = await startChild('raw-relay.mjs', ['--transport', transport, ...mode], { pin, label: label.replace('%s', 'relay') });
  const agent = await startChild('raw-agent.mjs', ['--transport', transport, '--url', relay.info.url, ...mode], {
    pin,
    label: label.replace('%s', 'agent'),
  });
  return { relay, agent, url: relay.info.url, stop: () => stopAll([agent, relay]) };
}

const cpuOf = async (child) => (await child.call('cpu')).total;
const memOf = (child) => child.call('mem', {}, 30_000);

// ---- figure 1 + 2: latency and throughput ----------------------------------------------------

async function latencyAndThroughput(withLatency, withThroughput, ssh) {
  log(`figures ${[withLatency && 1, withThroughput && 2].filter(Boolean).join(' and ')}: starting stacks`);
  const ours = await startOurs();
  // The same stack with tracing on (OTEL_* set, every span exported to a local stand-in collector), measured beside it.
  const sink = await startChild('otlp-sink.mjs', [], { label: 'otlp-sink' });
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: sink.info.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
  const traced = await startOurs({ env: otel, label: 'traced-' });
  const raw = { ws: await startRaw('ws'), grpc: await startRaw('grpc') };
  // Figure 1 only, diagnostics per transport: the raw relay reading every frame (the least a relay that numbers and checks
  // must do), alone and doing what a gateway must do for each prompt besides (checks, uuid and author, audit record, echo).
  const diag = {};
  if (withLatency)
    for (const t of ['ws', 'grpc']) for (const mode of ['read', 'duties']) diag[`${mode}-${t}`] = await startRaw(t, { mode });
  // Figure 1 only, also a diagnostic: ours keeping its state on disk as `tether gateway` does (file store, audit flushed per record).
  const stateDir = withLatency ? mkdtempSync(join(tmpdir(), 'tether-bench-state-')) : undefined;
  const stored = stateDir
    ? await startOurs({ transports: ['ws'], label: 'stored-', gatewayArgs: ['--state', stateDir] }).catch((err) => {
        rmSync(stateDir, { recursive: true, force: true });
        throw err;
      })
    : undefined;
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  const all = [driver, ours, traced, sink, raw.ws, raw.grpc, ...Object.values(diag), ...(stored ? [stored] : [])];
  const procs = [
    driver,
    ours.gw,
    ...Object.values(ours.agents),
    traced.gw,
    ...Object.values(traced.agents),
    sink,
    raw.ws.relay,
    raw.ws.agent,
    raw.grpc.relay,
    raw.grpc.agent,
    ...Object.values(diag).flatMap((d) => [d.relay, d.agent]),
    ...(stored ? [stored.gw, stored.agents.ws] : []),
  ];
  let tag = 'unpinned';
  try {
    for (const t of ['ws', 'grpc']) {
      await driver.call('open', { id: `ours-${t}`, kind: 'ours', url: ours.url[t], agent: `bench-${t}` });
      await driver.call('open', { id: `traced-${t}`, kind: 'ours', url: traced.url[t], agent: `bench-${t}`, otlp: sink.info.url });
      await driver.call('open', { id: `wire-${t}`, kind: 'wire', url: ours.url[t], agent: `bench-${t}` });
      await driver.call('open', { id: `raw-${t}`, kind: `raw-${t}`, url: raw[t].url });
    }
    for (const [id, d] of Object.entries(diag)) await driver.call('open', { id, kind: `raw-read-${id.split('-')[1]}`, url: d.url });
    if (stored) await driver.call('open', { id: 'stored-ws', kind: 'ours', url: stored.url.ws, agent: 'bench-ws' });
    await driver.call('open', { id: 'stdio', kind: 'stdio' });
    if (ssh.ok) await driver.call('open', { id: 'ssh', kind: 'ssh' });
    const targets = ['ws', 'grpc']
      .flatMap((t) => [`raw-${t}`, `ours-${t}`, `traced-${t}`, `wire-${t}`])
      .concat(Object.keys(diag), stored ? ['stored-ws'] : [], ['stdio'], ssh.ok ? ['ssh'] : []);
    /**
     * Baseline and ours (tracing off and on) back to back, the order rotating from round to
     * round; `withDiagnostics` (figure 1): also the reading relay (alone and doing a prompt's
     * duties) and, over ws, ours with its state on disk.
     */
    const orderOf = (t, r, withDiagnostics = false) => {
      const extra = withDiagnostics ? [`read-${t}`, `duties-${t}`, ...(stored && t === 'ws' ? ['stored-ws'] : [])] : [];
      const ids = [`raw-${t}`, `ours-${t}`, `traced-${t}`, `wire-${t}`, ...extra];
      return ids.map((_, i) => ids[(i + r) % ids.length]);
    };
    const stacks = { traced, stored, ours, wire: ours };
    const stackOf = (id) => stacks[id.split('-')[0]];
    const rawOf = (id) => ({ 'raw-ws': raw.ws, 'raw-grpc': raw.grpc, ...diag })[id];
    const relayOf = (id) => stackOf(id)?.gw ?? rawOf(id)?.relay;
    const agentOf = (id) => stackOf(id)?.agents[id.endsWith('-grpc') ? 'grpc' : 'ws'] ?? rawOf(id)?.agent;
    /** Runs one measurement and adds the CPU each process spent on it, per unit of work. */
    const withCpu = async (id, per, run) => {
      const who = { relay: relayOf(id), agent: agentOf(id), client: driver };
      const before = {};
      for (const [k, c] of Object.entries(who)) if (c) before[k] = await cpuOf(c);
      let res;
      try {
        res = await run();
      } catch (err) {
        // One failed run is reported (notes, JSON) and left out of the medians; the rest goes on.
        results.notes.push(`${tag} ${id}: ${err.message}`);
        log(`${id} failed: ${err.message}`);
        return { error: err.message };
      }
      for (const [k, c] of Object.entries(who)) if (c) res[`${k}CpuUs${per.name}`] = ((await cpuOf(c)) - before[k]) / per.count(res);
      return res;
    };
    const latRun = (id) =>
      withCpu(id, { name: 'PerRtt', count: () => C.latency.iters + C.latency.warmup }, () =>
        driver.call('latency', { id, iters: C.latency.iters, warmup: C.latency.warmup }),
      );
    if (withLatency) {
      // Each round: every process (threads and engines included) pinned to CPU 0, then unpinned.
      const lat = { pinned: Object.fromEntries(targets.map((k) => [k, []])), unpinned: Object.fromEntries(targets.map((k) => [k, []])) };
      results.figures.latency_pinned = lat.pinned; // filled as it goes: a run cut at its time limit keeps it
      results.figures.latency_unpinned = lat.unpinned;
      for (let r = 0; r < C.latency.rounds && !overBudget(); r++) {
        for (const pin of [true, false]) {
          tag = pin ? 'pinned' : 'unpinned';
          setAffinity(procs, pin ? '0' : ALL_CPUS);
          for (const t of ['ws', 'grpc']) {
            for (const id of orderOf(t, r, true)) lat[tag][id].push(await latRun(id));
          }
          for (const id of targets.filter((x) => x === 'stdio' || x === 'ssh')) lat[tag][id].push(await latRun(id));
        }
      }
      setAffinity(procs, ALL_CPUS);
      tag = 'unpinned';
      if (!hasTaskset) results.notes.push('taskset not available: the "pinned" latency runs were not pinned');
      results.figures.latency_pinned = lat.pinned;
      results.figures.latency_unpinned = lat.unpinned;
      log('figure 1 done');
    }

    if (withThroughput) {
      const tp = (results.figures.throughput = {});
      for (const [size, count, bytes] of [
        ['200B', C.throughput.small, 200],
        ['100KB', C.throughput.large, 100_000],
      ]) {
        const runs = Object.fromEntries(targets.map((k) => [k, []]));
        for (let r = 0; r < C.throughput.rounds && !overBudget(); r++) {
          for (const t of ['ws', 'grpc']) {
            for (const id of orderOf(t, r)) {
              runs[id].push(
                await withCpu(id, { name: 'PerFrame', count: () => count }, () => driver.call('throughput', { id, count, bytes }, 90_000)),
              );
            }
          }
          for (const id of targets.filter((x) => x === 'stdio' || x === 'ssh')) {
            runs[id].push(
              await withCpu(id, { name: 'PerFrame', count: () => count }, () => driver.call('throughput', { id, count, bytes }, 90_000)),
            );
          }
        }
        tp[size] = runs;
        log(`figure 2 (${size}) done`);
      }
      results.figures.throughput = tp;
      results.figures.gatewayMemAfterThroughput = await memOf(ours.gw);
    }
    results.figures.otlpSink = await sink.call('stats'); // what the traced stack exported, so "on" is seen to have traced
  } finally {
    await stopAll(all);
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  }
}

// ---- figure 3: fan-out ---------------------------------------------------------------------------

/**
 * The relays of one fan-out run: `relays` (their CPU is the relay's cost), where the
 * controller connects (`url`), where viewers go (`viewerUrls`, spread evenly), and `others`
 * whose CPU is counted apart (the NATS server of a cluster).
 */
async function fanoutStack(kind) {
  // The controller that starts the stream is the minimal client (cheap in the driver); the
  // viewers are minimal clients too: the figure is about the gateway.
  if (kind === 'ours') {
    const s = await startOurs({ transports: ['ws'] });
    return { relays: [s.gw], url: s.url.ws, viewerKind: 'ours', ctrlKind: 'wire', agent: 'bench-ws', stop: s.stop };
  }
  if (kind === 'cluster') {
    // The session's home is gateway-1 (its agent and controller are there); a third of the
    // viewers are on it, the others on gateways 2 and 3, which read the session from JetStream.
    const s = await startCluster();
    return {
      relays: s.gateways,
      others: [s.nats],
      url: s.urls[0],
      viewerUrls: s.urls,
      viewerKind: 'ours',
      ctrlKind: 'wire',
      agent: 'bench-ws',
      stop: s.stop,
    };
  }
  const s = await startRaw('ws');
  return { relays: [s.relay], url: s.url, viewerKind: 'raw', ctrlKind: 'raw-ws', stop: s.stop };
}

/** CPU µs the processes spent so far, summed. */
const cpuSum = async (procs) => (await Promise.all(procs.map(cpuOf))).reduce((a, b) => a + b, 0);

async function fanoutOnce(kind, n, driver, { slowTest = false } = {}) {
  const stack = await fanoutStack(kind);
  try {
    const ctrl = await driver.call('open', { id: `ctrl-${kind}`, kind: stack.ctrlKind, url: stack.url, agent: stack.agent });
    const t0 = Date.now();
    await driver.call(
      'viewersOpen',
      { kind: stack.viewerKind, urls: stack.viewerUrls ?? [stack.url], sessionId: ctrl.sessionId, fromSeq: (ctrl.lastSeq ?? 0) + 1, n },
      180_000,
    );
    // Until every viewer has had all its presence frames (N²/2 of them for ours).
    const settled = await driver.call('settle', { quietMs: 500, maxMs: 120_000 }, 130_000);
    const attachSeconds = (Date.now() - t0) / 1000;
    const out = { attachSeconds, settled };
    const count = slowTest ? C.slow.count : Math.max(200, Math.min(20_000, Math.round(C.fanout.deliveries / n)));
    const rateSeconds = slowTest ? C.slow.rateSeconds : C.fanout.rateSeconds;
    const measure = async () => {
      const c0 = await cpuSum(stack.relays);
      const n0 = await cpuSum(stack.others ?? []);
      const tp = await driver.call('fanout', { ctrl: `ctrl-${kind}`, count, bytes: 200, timeoutMs: 90_000 }, 120_000);
      tp.relayCpuUsPerDelivery = ((await cpuSum(stack.relays)) - c0) / Math.max(1, tp.delivered);
      if (stack.others) tp.othersCpuUsPerDelivery = ((await cpuSum(stack.others)) - n0) / Math.max(1, tp.delivered);
      await driver.call('settle', { quietMs: 250, maxMs: 30_000 }, 40_000);
      const rate = await driver.call(
        'fanout',
        {
          ctrl: `ctrl-${kind}`,
          count: C.fanout.rate * rateSeconds,
          bytes: 200,
          rate: C.fanout.rate,
          record: true,
          timeoutMs: rateSeconds * 1000 + 15_000,
        },
        120_000,
      );
      return { throughput: tp, rate };
    };
    out.normal = await measure();
    if (slowTest) {
      await driver.call('slowAdd', { kind: stack.viewerKind, url: stack.url, sessionId: ctrl.sessionId });
      await driver.call('settle', { quietMs: 300, maxMs: 30_000 }, 40_000);
      out.withSlow = await measure();
      out.slowRelayMem = await memOf(stack.relays[0]);
    }
    await driver.call('viewersClose');
    await driver.call('close', { id: `ctrl-${kind}` });
    return out;
  } finally {
    await stack.stop();
  }
}

async function figure3() {
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  const fan = {};
  try {
    for (const n of C.fanout.ns) {
      fan[n] = { raw: [], ours: [] };
      const rounds = n >= 1000 ? (C.fanout.roundsAt1000 ?? C.fanout.rounds) : C.fanout.rounds;
      for (let r = 0; r < rounds && !overBudget(); r++) {
        for (const kind of r % 2 ? ['ours', 'raw'] : ['raw', 'ours']) {
          try {
            fan[n][kind].push(await fanoutOnce(kind, n, driver));
          } catch (err) {
            results.notes.push(`fan-out ${kind} ${n}: ${err.message}`);
            log(`fan-out ${kind} ${n} failed: ${err.message}`);
          }
        }
      }
      log(`figure 3: ${n} viewers done`);
    }
    results.figures.fanout = fan;
    const slow = { raw: [], ours: [] };
    for (let r = 0; r < C.slow.rounds && !overBudget(); r++) {
      for (const kind of r % 2 ? ['ours', 'raw'] : ['raw', 'ours']) {
        try {
          slow[kind].push(await fanoutOnce(kind, C.slow.n, driver, { slowTest: true }));
        } catch (err) {
          results.notes.push(`slow viewer ${kind}: ${err.message}`);
          log(`slow viewer ${kind} failed: ${err.message}`);
        }
      }
    }
    results.figures.slowViewer = slow;
    log('figure 3: slow viewer done');
  } finally {
    await driver.stop();
  }
}

// ---- figure 5: fan-out over three gateways on one NATS ------------------------------------------

/**
 * Figure 3's fan-out with the viewers spread over three gateways of one cluster, against one
 * gateway with every viewer (the figure-3 setup), interleaved in the same run.
 */
async function figure5() {
  if (!natsServerBinary()) {
    results.notes.push('figure 5 skipped: nats-server is not installed (apt-get install nats-server)');
    log('figure 5 skipped: no nats-server');
    return;
  }
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  const out = {};
  try {
    for (const n of C.cluster.ns) {
      out[n] = { ours: [], cluster: [] };
      for (let r = 0; r < C.cluster.rounds && !overBudget(); r++) {
        for (const kind of r % 2 ? ['cluster', 'ours'] : ['ours', 'cluster']) {
          try {
            out[n][kind].push(await fanoutOnce(kind, n, driver));
          } catch (err) {
            results.notes.push(`cluster fan-out ${kind} ${n}: ${err.message}`);
            log(`cluster fan-out ${kind} ${n} failed: ${err.message}`);
          }
        }
      }
      log(`figure 5: ${n} viewers done`);
    }
  } finally {
    await driver.stop();
    results.figures.clusterFanout = out;
  }
}

// ---- figure 4: idle cost ----------------------------------------------------------------------------

const perItem = (m0, m1, n) => ({
  rssKB: (m1.rss - m0.rss) / n / 1024,
  heapKB: (m1.heapUsed + m1.external - m0.heapUsed - m0.external) / n / 1024,
});

/**
 * How long idle connections are left alone before the idle figure is read. Opening hundreds
 * of connections at once grows V8's young generation (up to 16 MB of semi-spaces, resident
 * in RSS, once per process, not per connection); V8's memory reducer gives it back after
 * about 8 s without allocation, which no forced GC does. An idle client sits for minutes, so
 * the figure is read after that, for ours and the raw relays alike; the reading 0.5 s after
 * the burst is kept beside it (`burst`). The baseline before opening is read settled too.
 */
const IDLE_SETTLE_MS = C.idle.settleMs;

/** Memory of `child` once it has been idle long enough for V8 to give back its young generation. */
async function settledMem(child) {
  await new Promise((r) => setTimeout(r, IDLE_SETTLE_MS));
  return memOf(child);
}

/** Memory per item 0.5 s after opening (`burst`) and once idle (the figure); `m0` read by settledMem. */
async function idleMemory(child, m0, n) {
  await new Promise((r) => setTimeout(r, 500));
  const burst = perItem(m0, await memOf(child), n);
  await new Promise((r) => setTimeout(r, IDLE_SETTLE_MS - 500));
  const m1 = await memOf(child);
  return { ...perItem(m0, m1, n), burst, m0, m1 };
}

async function idleClientsOurs(transport, n, driver) {
  const gw = await startChild('tether-gateway.mjs', [], { label: 'gateway' });
  const fake = await startChild('fake-agent.mjs', ['--gateway', gw.info.url, '--name', 'fake'], { label: 'fake-agent' });
  try {
    const url = transport === 'ws' ? gw.info.url : gw.info.grpcUrl;
    const { ids } = await driver.call('sessionsCreate', { url: gw.info.url, agent: 'fake', n: Math.ceil(n / C.idle.perSession) }, 120_000);
    // Warm-up: a few clients come and go, so code paths are compiled before the baseline.
    await driver.call('idleOpen', { kind: `ours-${transport}`, url, sessionIds: ids, n: 50 }, 60_000);
    await driver.call('idleClose');
    await waitFor(async () => (await gw.call('stats')).clients === 0, 10_000);
    const m0 = await settledMem(gw);
    const t0 = Date.now();
    await driver.call('idleOpen', { kind: `ours-${transport}`, url, sessionIds: ids, n }, 300_000);
    const openSeconds = (Date.now() - t0) / 1000;
    const mem = await idleMemory(gw, m0, n);
    await driver.call('idleClose');
    return { n, sessions: ids.length, openSeconds, ...mem };
  } finally {
    await stopAll([fake, gw]);
  }
}

async function idleClientsRaw(transport, n, driver) {
  const relay = await startChild('raw-relay.mjs', ['--transport', transport], { label: `raw-relay-${transport}` });
  try {
    await driver.call('idleOpen', { kind: `raw-${transport}`, url: relay.info.url, n: 50 }, 60_000);
    await driver.call('idleClose');
    const m0 = await settledMem(relay);
    await driver.call('idleOpen', { kind: `raw-${transport}`, url: relay.info.url, n }, 300_000);
    const mem = await idleMemory(relay, m0, n);
    await driver.call('idleClose');
    return { n, ...mem };
  } finally {
    await relay.stop();
  }
}

async function idleSessionsGateway(n, driver) {
  const gw = await startChild('tether-gateway.mjs', [], { label: 'gateway' });
  const fake = await startChild('fake-agent.mjs', ['--gateway', gw.info.url, '--name', 'fake'], { label: 'fake-agent' });
  try {
    await driver.call('sessionsCreate', { url: gw.info.url, agent: 'fake', n: 20 });
    const m0 = await memOf(gw);
    const t0 = Date.now();
    await driver.call('sessionsCreate', { url: gw.info.url, agent: 'fake', n }, 600_000);
    const createSeconds = (Date.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 500));
    const m1 = await memOf(gw);
    return { n, createSeconds, ...perItem(m0, m1, n), m0, m1 };
  } finally {
    await stopAll([fake, gw]);
  }
}

async function idleSessionsAgent(n, driver) {
  const engine = join(BENCH_DIR, 'idle-engine.sh');
  const ours = await startOurs({ transports: ['ws'], engine });
  try {
    await driver.call('sessionsCreate', { url: ours.url.ws, agent: 'bench-ws', n: 10 });
    const a0 = await memOf(ours.agents.ws);
    const g0 = await memOf(ours.gw);
    const t0 = Date.now();
    await driver.call('sessionsCreate', { url: ours.url.ws, agent: 'bench-ws', n, concurrency: 8 }, 300_000);
    const createSeconds = (Date.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 500));
    const a1 = await memOf(ours.agents.ws);
    const g1 = await memOf(ours.gw);
    return { n, createSeconds, agent: perItem(a0, a1, n), gateway: perItem(g0, g1, n), a0, a1 };
  } finally {
    await ours.stop();
  }
}

async function figure4() {
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  const idle = (results.figures.idle = { clients: { ws: [], grpc: [] }, sessions: [], agent: undefined });
  try {
    for (const n of C.idle.clients) {
      if (overBudget()) break;
      idle.clients.ws.push({ raw: await idleClientsRaw('ws', n, driver), ours: await idleClientsOurs('ws', n, driver) });
      log(`figure 4: ${n} idle ws clients done`);
    }
    for (const n of C.idle.grpcClients) {
      if (overBudget()) break;
      idle.clients.grpc.push({ raw: await idleClientsRaw('grpc', n, driver), ours: await idleClientsOurs('grpc', n, driver) });
      log(`figure 4: ${n} idle grpc clients done`);
    }
    for (const n of C.idle.sessions) {
      if (overBudget()) break;
      idle.sessions.push(await idleSessionsGateway(n, driver));
      log(`figure 4: ${n} idle sessions (gateway) done`);
    }
    if (!overBudget()) idle.agent = await idleSessionsAgent(C.idle.agentSessions, driver);
    log('figure 4: agent per session done');
  } finally {
    await driver.stop();
  }
  results.figures.idle = idle;
}

// ---- levers --------------------------------------------------------------------------------------------

/**
 * The raw broadcast relay (100 viewers) three ways, to price what our send path does per
 * frame and client: the received Buffer (baseline), a string, a string with a callback and a
 * promise per send (core/channel/ws.ts write()). Relay CPU µs per delivery, interleaved.
 */
async function levers() {
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  const out = { buffer: [], string: [], promise: [] };
  try {
    for (let r = 0; r < (QUICK ? 1 : 3) && !overBudget(); r++) {
      for (const mode of Object.keys(out)) {
        const relay = await startChild('raw-relay.mjs', ['--transport', 'ws', '--send', mode], { label: `raw-relay-${mode}` });
        const agent = await startChild('raw-agent.mjs', ['--transport', 'ws', '--url', relay.info.url], { label: 'raw-agent' });
        try {
          await driver.call('open', { id: 'lever', kind: 'raw-ws', url: relay.info.url });
          await driver.call('viewersOpen', { kind: 'raw', url: relay.info.url, n: 100 });
          await driver.call('fanout', { ctrl: 'lever', count: 300, bytes: 330 });
          const c0 = await cpuOf(relay);
          const res = await driver.call('fanout', { ctrl: 'lever', count: 3000, bytes: 330 }, 120_000);
          out[mode].push(((await cpuOf(relay)) - c0) / res.delivered);
          await driver.call('viewersClose');
          await driver.call('close', { id: 'lever' });
        } finally {
          await stopAll([agent, relay]);
        }
      }
    }
  } finally {
    await driver.stop();
  }
  results.figures.levers = out;
  log('levers done');
}

// ---- profile ------------------------------------------------------------------------------------------

/** A profiled run: one client of `kind` on `transport` sends `count` frames of `bytes`, three times. */
function throughputRun(driver, { kind, transport, count, bytes }) {
  return async (ours) => {
    await driver.call('open', { id: 'p', kind, url: ours.url[transport], agent: `bench-${transport}` });
    for (let i = 0; i < 3; i++) await driver.call('throughput', { id: 'p', count, bytes }, 90_000);
    await driver.call('close', { id: 'p' });
  };
}

/** A profiled run: `iters` sequential prompt round trips of one client of `kind` on `transport`. */
function roundTripRun(driver, { kind, transport, iters }) {
  return async (ours) => {
    await driver.call('open', { id: 'p', kind, url: ours.url[transport], agent: `bench-${transport}` });
    await driver.call('latency', { id: 'p', iters, warmup: 200 }, 120_000);
    await driver.call('close', { id: 'p' });
  };
}

async function profile() {
  // Next to the results file (`--out`), so a run writing elsewhere leaves bench/results/ alone.
  const dir = OUT.replace(/\.json$/, '') + '-prof';
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const out = {};
  // `--profiles a,b` runs only the profiles whose name contains one of the words.
  const pick = opt('profiles', '').split(',').filter(Boolean);
  for (const [name, run] of [
    [
      'single client, 200-byte frames (ws)',
      (driver) => throughputRun(driver, { kind: 'ours', transport: 'ws', count: 20_000, bytes: 200 }),
    ],
    [
      'single client, 200-byte frames (grpc)',
      (driver) => throughputRun(driver, { kind: 'ours', transport: 'grpc', count: 20_000, bytes: 200 }),
    ],
    ['single client, 100 KB frames (ws)', (driver) => throughputRun(driver, { kind: 'wire', transport: 'ws', count: 300, bytes: 100_000 })],
    [
      'single client, 100 KB frames (grpc)',
      (driver) => throughputRun(driver, { kind: 'wire', transport: 'grpc', count: 300, bytes: 100_000 }),
    ],
    ['round trip, GatewayClient library (ws)', (driver) => roundTripRun(driver, { kind: 'ours', transport: 'ws', iters: 10_000 })],
    ['round trip, GatewayClient library (grpc)', (driver) => roundTripRun(driver, { kind: 'ours', transport: 'grpc', iters: 10_000 })],
    [
      'fan-out to 100 viewers, 200-byte frames (ws)',
      (driver) => async (ours) => {
        const ctrl = await driver.call('open', { id: 'p', kind: 'wire', url: ours.url.ws, agent: 'bench-ws' });
        await driver.call(
          'viewersOpen',
          { kind: 'ours', url: ours.url.ws, sessionId: ctrl.sessionId, fromSeq: ctrl.lastSeq + 1, n: 100 },
          120_000,
        );
        await driver.call('settle', { quietMs: 500 }, 130_000);
        for (let i = 0; i < 3; i++) await driver.call('fanout', { ctrl: 'p', count: 1_000, bytes: 200, timeoutMs: 60_000 }, 90_000);
        await driver.call('viewersClose');
        await driver.call('close', { id: 'p' });
      },
    ],
  ]) {
    if (pick.length && !pick.some((w) => name.includes(w))) continue;
    const sub = join(dir, String(Object.keys(out).length));
    mkdirSync(sub, { recursive: true });
    const transport = name.includes('(grpc)') ? 'grpc' : 'ws';
    // The driver (the clients) is profiled too: its own process per run, so its profile covers this run only.
    const pin = flag('profile-pinned'); // every process on CPU 0, as figure 1's pinned rounds (engines too: they inherit it)
    const driver = await startChild('driver.mjs', [], {
      pin,
      label: 'driver',
      execArgv: ['--cpu-prof', `--cpu-prof-dir=${join(sub, 'driver')}`],
    });
    const ours = await startOurs({ transports: [transport], prof: sub, pin });
    try {
      await run(driver)(ours);
    } finally {
      await ours.stop();
      await driver.stop();
    }
    for (const proc of ['gateway', `agent-${transport}`, 'driver']) {
      const d = join(sub, proc);
      const file = existsSync(d) ? readdirSync(d).find((f) => f.endsWith('.cpuprofile')) : undefined;
      out[`${proc}: ${name}`] = file ? analyzeProfile(join(d, file), ROOT) : { error: 'no profile written' };
    }
    log(`profile: ${name} done`);
  }
  results.figures.profile = out;
}

async function waitFor(pred, timeoutMs) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await pred()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

async function main() {
  log(
    `tether bench (${results.mode}); ${results.machine.cpus} CPUs, node ${results.machine.node}, ws ${results.machine.ws}, grpc-js ${results.machine.grpc}, bufferutil ${results.machine.bufferutil}`,
  );
  const ssh = await sshAvailable();
  results.ssh = ssh;
  if (!ssh.ok) log(`ssh baseline: n/a (${ssh.why})`);
  const steps = [];
  if (ONLY.has(1) || ONLY.has(2)) steps.push(['fig1-2', () => latencyAndThroughput(ONLY.has(1), ONLY.has(2), ssh)]);
  if (ONLY.has(3)) steps.push(['fig3', figure3]);
  if (ONLY.has(4)) steps.push(['fig4', figure4]);
  if (ONLY.has(5)) steps.push(['fig5', figure5]);
  if (ONLY.has(6)) steps.push(['web', async () => (results.figures.web = await webFigure({ rounds: QUICK ? 1 : 3, log }))]);
  steps.push(...lifecycleSteps(ONLY, { C, log, results, overBudget, deadline: started + BUDGET_MS, startOurs, startCluster }));
  if (PROFILE) steps.push(...(opt('profiles') ? [] : [['levers', levers]]), ['profile', profile]);
  for (const [name, step] of steps) {
    if (overBudget()) {
      results.notes.push(`${name} skipped: time budget used up`);
      log(`${name} skipped: over the time budget`);
      continue;
    }
    try {
      await step();
    } catch (err) {
      results.notes.push(`${name} failed: ${err.message}`);
      log(`${name} FAILED: ${err.stack ?? err}`);
    }
  }
  writeResults();
  log(`results: ${OUT} (table also in ${OUT.replace(/\.json$/, '.md')}); children still running: ${liveCount()}`);
}

/** Writes the results and their tables (also what a run stopped at its hard limit has measured). */
function writeResults() {
  results.seconds = (Date.now() - started) / 1000;
  const { text, markdown, verdicts } = report(results);
  results.verdicts = verdicts;
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, JSON.stringify(results, null, 1));
  writeFileSync(OUT.replace(/\.json$/, '.md'), markdown);
  console.log('\n' + text);
}

// `--report <results.json>`: only re-render the tables of an earlier run.
const again = opt('report');
if (again) {
  const old = JSON.parse(readFileSync(again, 'utf8'));
  const { markdown, verdicts } = report(old);
  old.verdicts = verdicts;
  writeFileSync(again.replace(/\.json$/, '.md'), markdown);
  console.log(markdown);
  process.exit(0);
}

const watchdog = setTimeout(() => {
  console.error(`bench: hard time limit (${(BUDGET_MS * 1.3) / 1000} s) reached; writing what was measured, stopping everything`);
  results.incomplete = `stopped at the hard time limit (${(BUDGET_MS * 1.3) / 1000} s)`;
  results.notes.push(results.incomplete);
  try {
    writeResults();
  } finally {
    process.exit(1);
  }
}, BUDGET_MS * 1.3);
watchdog.unref();
await main();
process.exit(0);
