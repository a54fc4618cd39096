/**
 * The tables of the lifecycle figures (bench/lifecycle.mjs) and of prompt → first engine
 * byte (derived from figure 1's runs): p50 / p99 over the cuts, kills or rounds of one run,
 * each beside its same-run baseline.
 */
import { overhead, spread, summarize } from './stats.mjs';

const ms = (x) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x.toFixed(1)) : 'n/a');
const pXX = (xs) => {
  const s = summarize(xs.filter(Number.isFinite));
  return s.n ? `${ms(s.p50)} / ${ms(s.p99)}` : 'n/a';
};
const sum = (xs, k) => xs.reduce((a, x) => a + (x[k] ?? 0), 0);
const T = { ws: 'WebSocket', grpc: 'gRPC' };

/**
 * Prompt → first engine byte at the client: figure 1's round trip is exactly that (the
 * stand-in engine answers a user line at once), so the overhead is ours minus the stdio pipe
 * of the same rounds, per round, then the median over rounds.
 */
function firstByte(F, table, cell) {
  const rows = [];
  for (const tag of ['pinned', 'unpinned']) {
    const lat = F[`latency_${tag}`];
    if (!lat?.stdio) continue;
    const row = (id, what) => {
      const per = (lat[id] ?? []).map((o, r) => overhead(o, lat.stdio[r]));
      rows.push([
        `${what} (${tag})`,
        cell(spread((lat[id] ?? []).map((x) => x.p50))),
        cell(spread(lat.stdio.map((x) => x.p50))),
        cell(spread(per.map((x) => x.p50))),
        cell(spread(per.map((x) => x.p99))),
      ]);
    };
    for (const t of ['ws', 'grpc']) row(`ours-${t}`, `${T[t]}, GatewayClient library`);
    // The gateway as `tether gateway` runs it: its audit trail flushed to disk before each prompt goes on (docs/security.md AU4).
    if (lat['stored-ws']) row('stored-ws', 'WebSocket, GatewayClient library, state on disk');
  }
  if (!rows.length) return undefined;
  return (
    '### Figure 1b: prompt → first engine byte at the client, Tether over the stdio pipe (from figure 1: same rounds; the stand-in engine answers at once)\n\n' +
    table(['path', 'Tether p50 µs', 'stdio p50 µs', 'overhead p50 µs', 'overhead p99 µs'], rows)
  );
}

export function lifecycleTables(F, { table, cell }) {
  const parts = [firstByte(F, table, cell)];
  if (F.reconnect) {
    const rows = [];
    for (const t of ['ws', 'grpc']) {
      const r = F.reconnect[t];
      if (!r) continue;
      rows.push([
        T[t],
        r.cuts.length,
        pXX(r.cuts.map((c) => c.resumedMs)),
        `${sum(r.cuts, 'missing')} / ${sum(r.cuts, 'doubled')}`,
        pXX(r.fresh),
      ]);
    }
    parts.push(
      "### Figure 7: reconnect, a client's link cut while the engine streams (250 frames/s): cut → resumed holding every frame, ms (the client's default backoff, 0.5 s ± 20 %, included)\n\n" +
        table(['transport', 'cuts', 'resumed p50 / p99', 'frames missing / doubled', 'baseline: fresh connect + attach p50 / p99'], rows),
    );
  }
  if (F.failover) {
    const k = F.failover.kills;
    parts.push(
      '### Figure 8: agent fail-over, 3 gateways on one NATS: kill -9 of the gateway holding the agent → the first frame the engine wrote after it, at a client on another gateway, ms\n\n' +
        table(
          [
            'kills',
            'fail-over p50 / p99',
            'frames missing / doubled',
            "baseline: the agent's backoff floor",
            'baseline: fresh connect + create + first frame p50 / p99',
          ],
          [
            [
              k.length,
              pXX(k.map((x) => x.ms)),
              `${sum(k, 'missing')} / ${sum(k, 'doubled')}`,
              ms(F.failover.backoffFloorMs),
              pXX(k.map((x) => x.freshMs)),
            ],
          ],
        ),
    );
  }
  if (F.lateJoiner) {
    const rows = [];
    for (const t of ['ws', 'grpc']) {
      const { long = [], short = [] } = F.lateJoiner[t] ?? {};
      if (!long.length) continue;
      rows.push([
        `${T[t]}, GatewayClient library`,
        cell(spread(long.map((x) => x.ms))),
        ms(long[0].mb),
        `${sum(long, 'missing')} / ${sum(long, 'doubled')}`,
        cell(spread(short.map((x) => x.ms))),
      ]);
    }
    const web = F.lateJoiner.web;
    if (web?.long?.length)
      rows.push([
        "web page (Chromium; the same mix, written by the web figure's engine), to the last answer on screen",
        cell(spread(web.long.map((x) => x.openMs))),
        '',
        '',
        cell(spread(web.short.map((x) => x.openMs))),
      ]);
    parts.push(
      '### Figure 9: late joiner, attach to a session of 4,000 frames (24 in 25 deltas of 100–400 B, 1 in 25 a 5–50 KB tool result) until its last frame is in hand, ms\n\n' +
        table(['client', '4,000 frames, ms', 'MB replayed', 'missing / doubled', 'baseline: 2 frames, ms'], rows),
    );
  }
  if (F.sessionsPerAgent) {
    const s = F.sessionsPerAgent;
    const base = s.steps[0]?.p99;
    const rows = s.steps.map((x) => [
      x.n,
      ms(x.p50 / 1000),
      ms(x.p99 / 1000),
      Number.isFinite(base) ? `${(x.p99 / base).toFixed(2)}×` : 'n/a',
    ]);
    const verdict =
      s.brokeAt !== undefined
        ? `held ${s.held ?? 0} sessions; p99 more than doubled at ${s.brokeAt}${s.error ? ` (${s.error})` : ''}`
        : `held ${s.held ?? 0} (the cap was ${s.cap}: p99 never doubled)`;
    parts.push(
      `### Figure 10: sessions per agent, each in a closed loop of prompts (one in flight, ~20 ms between; a sed echo engine per session), round trip ms; doubling until p99 > 2× the 1-session p99: ${verdict}\n\n` +
        table(['sessions', 'p50 ms', 'p99 ms', 'p99 / 1 session'], rows),
    );
  }
  return parts.filter(Boolean);
}
