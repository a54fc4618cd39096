/**
 * The lifecycle figures (issue 36): what a client sees when a link drops, when the gateway
 * holding its agent dies, when it joins a long session late, and how many sessions one agent
 * carries. Each beside a baseline taken in the same run. The clients are in the driver
 * (bench/lib/lifecycle-clients.mjs); this side starts and kills the processes.
 *
 *   7 reconnect: cuts of a client's link (a TCP proxy the driver cuts), ws and gRPC;
 *     baseline: a fresh connection + attach.
 *   8 fail-over: kill -9 of the gateway holding the agent, in a 3-gateway cluster;
 *     baseline: a fresh connect + create + first frame, and the agent's backoff floor.
 *   9 late joiner: attach to a session of 4,000 frames (a realistic mix of sizes) until its
 *     last frame is in hand, the library and the web page; baseline: a 2-frame session.
 *  10 sessions per agent: the doubling search until the round trip's p99 doubles.
 *
 * Every figure writes into `results.figures` as it goes, so a run stopped at its time limit
 * keeps what was measured.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BENCH_DIR, startChild, stopAll } from './lib/proc.mjs';
import { natsServerBinary } from './lib/nats.mjs';
import { doublingSearch } from './lib/stats.mjs';
import { launchChromium, mixOpen } from './web.mjs';
import { helpAndExit } from './lib/usage.mjs';

helpAndExit(import.meta.url);

export const LIFECYCLE_COUNTS = {
  quick: {
    reconnect: { cuts: 10 },
    failover: { kills: 3 },
    lateJoiner: { frames: 4_000, rounds: 1 },
    sessions: { cap: 32, seconds: 1.5, minSamples: 150 },
  },
  full: {
    reconnect: { cuts: 30 },
    failover: { kills: 6 },
    lateJoiner: { frames: 4_000, rounds: 2 },
    sessions: { cap: 512, seconds: 2, minSamples: 300 },
  },
};

/** Figure 7: link cuts and resumes, ws then gRPC, on one gateway. */
async function reconnect(ctx) {
  const { C, startOurs, results, log } = ctx;
  const fig = (results.figures.reconnect = {});
  const ours = await startOurs();
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  try {
    for (const t of ['ws', 'grpc']) {
      if (ctx.overBudget()) break;
      fig[t] = await driver.call(
        'reconnectCuts',
        { url: ours.url[t], agent: `bench-${t}`, cuts: C.reconnect.cuts, stopAt: ctx.deadline },
        C.reconnect.cuts * 40_000,
      );
      log(`figure 7 (${t}): ${fig[t].cuts.length} cuts done`);
      if (fig[t].cuts.length < C.reconnect.cuts) ctx.overBudget(); // the driver stopped cutting at the budget
    }
  } finally {
    await stopAll([driver]);
    await ours.stop();
  }
}

/** Figure 8: kill -9 of the gateway that holds the agent; the client sits on another one. */
async function failover(ctx) {
  const { C, startCluster, results, log } = ctx;
  if (!natsServerBinary()) {
    results.notes.push('figure 8 skipped: nats-server is not installed (apt-get install nats-server)');
    return;
  }
  const { AGENT_BACKOFF } = await import(pathToFileURL(join(BENCH_DIR, '..', 'dist/core/util/backoff.js')).href);
  const fig = (results.figures.failover = {
    kills: [],
    backoffFloorMs: AGENT_BACKOFF.initialMs * (1 - AGENT_BACKOFF.jitter),
  });
  const cluster = await startCluster();
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  try {
    for (let k = 0; k < C.failover.kills && !ctx.overBudget(); k++) {
      const holder = await agentHolder(cluster.gateways);
      const other = cluster.gateways.find((g) => g !== holder);
      const { freshMs } = await driver.call('failoverArm', { url: other.info.url, agent: 'bench-ws', count: 500, rate: 250 }, 60_000);
      const killedAtUs = Number(process.hrtime.bigint()) / 1000;
      holder.proc.kill('SIGKILL');
      const r = await driver.call('failoverWait', { killedAtUs, timeoutMs: 30_000 }, 60_000);
      fig.kills.push({ ...r, freshMs });
      log(`figure 8: kill ${k + 1}: ${r.ms.toFixed(0)} ms, missing ${r.missing}, doubled ${r.doubled}`);
      await holder.exited;
      // Back on its old ports, so the agent's list of gateways stays right.
      const i = cluster.gateways.indexOf(holder);
      const args = holder.args.filter(
        (_, j, a) => !['--port', '--grpc-port'].includes(a[j]) && !['--port', '--grpc-port'].includes(a[j - 1]),
      );
      cluster.gateways[i] = await startChild('tether-gateway.mjs', [...args, ...portsOf(holder)], { label: holder.label });
    }
  } finally {
    await stopAll([driver]);
    await cluster.stop();
  }
}

const portsOf = (gw) => ['--port', new URL(gw.info.url).port, '--grpc-port', new URL(gw.info.grpcUrl).port];

/** The gateway the agent is registered with now (bounded wait: it may be re-registering). */
async function agentHolder(gateways) {
  const end = Date.now() + 30_000;
  while (Date.now() < end) {
    for (const g of gateways) if ((await g.call('stats')).agents > 0) return g;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('no gateway of the cluster holds the agent');
}

/** The two sessions of figure 9, the baseline first in even rounds, last in odd ones. */
const sizesOfRound = (r, C) => {
  const both = [
    ['short', 2],
    ['long', C.lateJoiner.frames],
  ];
  return r % 2 ? both.reverse() : both;
};

/** Figure 9: late joiners of a 4,000-frame session and of a 2-frame one, ws and gRPC. */
async function lateJoiner(ctx) {
  const { C, startOurs, results, log } = ctx;
  const fig = (results.figures.lateJoiner = { ws: { long: [], short: [] }, grpc: { long: [], short: [] } });
  const ours = await startOurs();
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  try {
    for (let r = 0; r < C.lateJoiner.rounds && !ctx.overBudget(); r++) {
      for (const t of ['ws', 'grpc']) {
        for (const [key, count] of sizesOfRound(r, C)) {
          fig[t][key].push(await driver.call('lateJoin', { url: ours.url[t], agent: `bench-${t}`, count }, 300_000));
        }
      }
      log(`figure 9: round ${r + 1} done`);
    }
  } finally {
    await stopAll([driver]);
    await ours.stop();
  }
  // The web page: headless Chromium on `tether up`, the same mix (test/support/long-session-engine.mjs "mix N").
  fig.web = { long: [], short: [] };
  const browser = await launchChromium();
  try {
    for (let r = 0; r < C.lateJoiner.rounds && !ctx.overBudget(); r++) {
      for (const [key, frames] of sizesOfRound(r, C)) {
        fig.web[key].push(await mixOpen(browser, frames));
      }
      log(`figure 9 (web page): round ${r + 1} done`);
    }
  } finally {
    await browser.close();
  }
}

/** Figure 10: sessions on one agent (the sed echo engine), doubling until p99 doubles. */
async function sessionsPerAgent(ctx) {
  const { C, startOurs, results, log } = ctx;
  const ours = await startOurs({ transports: ['ws'], engine: join(BENCH_DIR, 'echo-engine.sh') });
  const driver = await startChild('driver.mjs', [], { label: 'driver' });
  const fig = (results.figures.sessionsPerAgent = { cap: C.sessions.cap, steps: [] });
  try {
    let base;
    const once = async (n) => {
      const step = await driver.call(
        'loadStep',
        { url: ours.url.ws, agent: 'bench-ws', n, seconds: C.sessions.seconds, minSamples: C.sessions.minSamples },
        300_000,
      );
      fig.steps.push(step);
      log(`figure 10: ${n} sessions: p50 ${step.p50.toFixed(0)} µs, p99 ${step.p99.toFixed(0)} µs`);
      return step.p99;
    };
    const r = await doublingSearch(
      async (n) => {
        const p99 = await once(n);
        base ??= p99;
        // A p99 of a few hundred samples is one slow sample away from doubling (a GC pause, a
        // descheduled process): a step that looks broken is measured once more and the better kept.
        return p99 > 2 * base ? Math.min(p99, await once(n)) : p99;
      },
      { start: 1, cap: C.sessions.cap, worse: (p99, base) => p99 > 2 * base, keepGoing: () => !ctx.overBudget() },
    );
    Object.assign(fig, { held: r.held, brokeAt: r.brokeAt, error: r.steps.find((s) => s.error)?.error });
  } finally {
    await stopAll([driver]);
    await ours.stop();
  }
}

/** The runner's steps for figures 7–10 that `only` names. */
export function lifecycleSteps(only, ctx) {
  const all = [
    [7, 'fig7 reconnect', reconnect],
    [8, 'fig8 fail-over', failover],
    [10, 'fig10 sessions per agent', sessionsPerAgent], // before 9, the longest, so a budget cut leaves the most
    [9, 'fig9 late joiner', lateJoiner],
  ];
  return all.filter(([n]) => only.has(n)).map(([, name, f]) => [name, () => f(ctx)]);
}
