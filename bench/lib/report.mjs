/**
 * Turns the raw results into the tables the runner prints and writes (markdown), and the
 * verdict on every target of issue 9: medians over rounds with [min–max], ratio ours /
 * same-run baseline.
 */
import { spread } from './stats.mjs';
import { webTable, webVerdicts } from '../web.mjs';
import { lifecycleTables } from './lifecycle-report.mjs';

export function fmt(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return 'n/a';
  const a = Math.abs(x);
  if (a >= 100_000) return `${(x / 1000).toFixed(0)}k`;
  if (a >= 10_000) return `${(x / 1000).toFixed(1)}k`;
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(2);
}
export const cell = (s) =>
  Number.isFinite(s.median) ? (s.runs.length > 1 ? `${fmt(s.median)} [${fmt(s.min)}–${fmt(s.max)}]` : fmt(s.median)) : 'n/a';
const ratio = (ours, base) => (Number.isFinite(ours) && Number.isFinite(base) && base !== 0 ? ours / base : NaN);
const rfmt = (r) => (Number.isFinite(r) ? `${r.toFixed(2)}×` : 'n/a');
const pct = (r) => (Number.isFinite(r) ? `${r >= 1 ? '+' : ''}${((r - 1) * 100).toFixed(1)} %` : 'n/a');
const yes = (ok) => (ok === undefined ? '–' : ok ? '**met**' : '**missed**');

export function table(head, rows) {
  const all = [head, ...rows].map((r) => r.map((c) => String(c)));
  const w = head.map((_, i) => Math.max(...all.map((r) => r[i].length), 3));
  const line = (r) => `| ${r.map((c, i) => c.padEnd(w[i])).join(' | ')} |`;
  return [line(all[0]), `|${w.map((n) => '-'.repeat(n + 2)).join('|')}|`, ...all.slice(1).map(line)].join('\n');
}

export function report(results) {
  const F = results.figures;
  const verdicts = [];
  const verdict = (figure, target, value, ok) => {
    verdicts.push({ figure, target, value, met: ok });
    return ok;
  };
  const parts = [];
  const m = results.machine;
  parts.push(
    `Tether benchmarks (${results.mode} run, ${new Date(results.started).toISOString().slice(0, 16)}Z, git ${m.gitRev ?? '?'}): ${m.cpus} × ${m.cpuModel}, node ${m.node}, ws ${m.ws}, grpc-js ${m.grpc}, bufferutil ${m.bufferutil}. ` +
      `Medians over rounds [min–max]; ratio = Tether / raw baseline of the same transport, measured in the same run (interleaved).`,
  );
  if (results.incomplete) parts.push(`**INCOMPLETE run (${results.incomplete}): the tables hold what was measured until then.**`);

  // Figure 1
  for (const tag of ['pinned', 'unpinned']) {
    const lat = F[`latency_${tag}`];
    if (!lat) continue;
    const s = (id, k) => spread((lat[id] ?? []).map((r) => r[k]));
    const rows = [];
    for (const t of ['ws', 'grpc']) {
      const name = t === 'ws' ? 'WebSocket' : 'gRPC';
      const b50 = s(`raw-${t}`, 'p50');
      const b99 = s(`raw-${t}`, 'p99');
      const o50 = s(`ours-${t}`, 'p50');
      const o99 = s(`ours-${t}`, 'p99');
      const r50 = ratio(o50.median, b50.median);
      const r99 = ratio(o99.median, b99.median);
      const ok = verdict(
        `1 latency ${tag} ${t}`,
        'p50 ≤ 1.3×, p99 ≤ 1.5× raw relay',
        `p50 ${rfmt(r50)}, p99 ${rfmt(r99)}`,
        r50 <= 1.3 && r99 <= 1.5,
      );
      /** A row of `id` beside the baseline (when the run has it); `last`: the last column, given its p50. */
      const beside = (id, label, last) => {
        if (!lat[id]) return;
        const x50 = s(id, 'p50');
        const x99 = s(id, 'p99');
        rows.push([
          `${name}: ${label}`,
          cell(x50),
          cell(x99),
          rfmt(ratio(x50.median, b50.median)),
          rfmt(ratio(x99.median, b99.median)),
          last(x50),
        ]);
      };
      rows.push([`${name}: raw two-hop relay`, cell(b50), cell(b99), 'baseline', '', '']);
      beside(`read-${t}`, 'raw relay that reads (each frame parsed, checked, numbered, kept)', () => '(diagnostic)');
      beside(
        `duties-${t}`,
        "the same, also doing a prompt's duties (input checks, uuid and author, audit record, echo to the poster)",
        () => "(diagnostic: a gateway's floor)",
      );
      rows.push([`${name}: Tether, GatewayClient library`, cell(o50), cell(o99), rfmt(r50), rfmt(r99), yes(ok)]);
      beside(`traced-${t}`, 'Tether, GatewayClient library, tracing on', (x50) => `(${rfmt(ratio(x50.median, o50.median))} of off)`);
      beside(
        `stored-${t}`,
        'Tether, GatewayClient library, state on disk as `tether gateway` keeps it (audit flushed per prompt)',
        (x50) => `(diagnostic; ${rfmt(ratio(x50.median, o50.median))} of in memory)`,
      );
      beside(`wire-${t}`, 'Tether, minimal protocol client', () => '(diagnostic)');
    }
    rows.push(['stdio pipe to the engine (floor)', cell(s('stdio', 'p50')), cell(s('stdio', 'p99')), '', '', '']);
    rows.push([
      'ssh 127.0.0.1 (what users do today)',
      lat.ssh ? cell(s('ssh', 'p50')) : 'n/a',
      lat.ssh ? cell(s('ssh', 'p99')) : 'n/a',
      results.ssh?.ok ? '' : `n/a: ${results.ssh?.why ?? ''}`,
      '',
      '',
    ]);
    const cpuRows = [];
    for (const id of [
      'raw-ws',
      'read-ws',
      'duties-ws',
      'ours-ws',
      'traced-ws',
      'stored-ws',
      'wire-ws',
      'raw-grpc',
      'read-grpc',
      'duties-grpc',
      'ours-grpc',
      'traced-grpc',
      'wire-grpc',
      'stdio',
    ]) {
      if (!lat[id]) continue;
      cpuRows.push([id, cell(s(id, 'relayCpuUsPerRtt')), cell(s(id, 'agentCpuUsPerRtt')), cell(s(id, 'clientCpuUsPerRtt'))]);
    }
    parts.push(
      `### Figure 1: round-trip latency, one small frame client → engine → client, µs (${tag === 'pinned' ? 'every process pinned to CPU 0 with taskset -c 0' : 'unpinned, 2 CPUs'})\n\n` +
        table(['path', 'p50 µs', 'p99 µs', 'p50 ratio', 'p99 ratio', 'target p50 ≤ 1.3×, p99 ≤ 1.5×'], rows) +
        `\n\nCPU µs per round trip (${tag}): raw-* = raw relay / raw agent, read-* = the same reading every frame, duties-* = the same doing a prompt's duties too, ours-* = GatewayClient, traced-* = the same with tracing on (OTLP to a local stand-in collector), stored-ws = the same with the gateway's state on disk, wire-* = minimal client; client = the driver process\n\n` +
        table(['path', 'gateway / relay', 'agent', 'client'], cpuRows),
    );
  }

  // Figure 2
  if (F.throughput) {
    const rows = [];
    for (const size of ['200B', '100KB']) {
      const runs = F.throughput[size];
      if (!runs) continue;
      const s = (id, k) => spread((runs[id] ?? []).map((r) => r[k]));
      for (const t of ['ws', 'grpc']) {
        const name = t === 'ws' ? 'WebSocket' : 'gRPC';
        const bf = s(`raw-${t}`, 'fps');
        const of = s(`ours-${t}`, 'fps');
        const r = ratio(of.median, bf.median);
        const bc = s(`raw-${t}`, 'relayCpuUsPerFrame');
        const oc = s(`ours-${t}`, 'relayCpuUsPerFrame');
        const ok = verdict(`2 throughput ${size} ${t}`, '≥ 70 % of raw relay', rfmt(r), r >= 0.7);
        let cpuOk;
        if (size === '200B')
          cpuOk = verdict(
            `2 gateway CPU per 200 B frame ${t}`,
            '≤ 6 µs',
            `${fmt(oc.median)} µs (raw relay ${fmt(bc.median)} µs)`,
            oc.median <= 6,
          );
        rows.push([
          size,
          `${name}: raw relay`,
          cell(bf),
          cell(s(`raw-${t}`, 'mbps')),
          cell(bc),
          cell(s(`raw-${t}`, 'agentCpuUsPerFrame')),
          cell(s(`raw-${t}`, 'clientCpuUsPerFrame')),
          'baseline',
          '',
        ]);
        if (runs[`traced-${t}`]) {
          const tf = s(`traced-${t}`, 'fps');
          rows.push([
            size,
            `${name}: Tether, GatewayClient library, tracing on`,
            cell(tf),
            cell(s(`traced-${t}`, 'mbps')),
            cell(s(`traced-${t}`, 'relayCpuUsPerFrame')),
            cell(s(`traced-${t}`, 'agentCpuUsPerFrame')),
            cell(s(`traced-${t}`, 'clientCpuUsPerFrame')),
            rfmt(ratio(tf.median, bf.median)),
            `(${rfmt(ratio(tf.median, of.median))} of off)`,
          ]);
        }
        const wf = s(`wire-${t}`, 'fps');
        rows.push([
          size,
          `${name}: Tether, GatewayClient library`,
          cell(of),
          cell(s(`ours-${t}`, 'mbps')),
          cell(oc),
          cell(s(`ours-${t}`, 'agentCpuUsPerFrame')),
          cell(s(`ours-${t}`, 'clientCpuUsPerFrame')),
          rfmt(r),
          `${yes(ok)}${cpuOk === undefined ? '' : ` · CPU ${yes(cpuOk)}`}`,
        ]);
        rows.push([
          size,
          `${name}: Tether, minimal protocol client`,
          cell(wf),
          cell(s(`wire-${t}`, 'mbps')),
          cell(s(`wire-${t}`, 'relayCpuUsPerFrame')),
          cell(s(`wire-${t}`, 'agentCpuUsPerFrame')),
          cell(s(`wire-${t}`, 'clientCpuUsPerFrame')),
          rfmt(ratio(wf.median, bf.median)),
          '(diagnostic)',
        ]);
      }
      rows.push([
        size,
        'stdio pipe (floor)',
        cell(s('stdio', 'fps')),
        cell(s('stdio', 'mbps')),
        '',
        '',
        cell(s('stdio', 'clientCpuUsPerFrame')),
        '',
        '',
      ]);
    }
    parts.push(
      `### Figure 2: streaming throughput engine → one client\n\n` +
        table(
          [
            'frame',
            'path',
            'frames/s',
            'MB/s',
            'gateway / relay CPU µs/frame',
            'agent CPU µs/frame',
            'client CPU µs/frame',
            'ratio',
            'target ≥ 0.70×; gateway ≤ 6 µs/frame',
          ],
          rows,
        ) +
        (F.otlpSink
          ? `\n\n"tracing on": the same gateway and agents started with OTEL_EXPORTER_OTLP_ENDPOINT (and the client with its telemetry), every span exported to a local stand-in collector (${F.otlpSink.requests} exports, ${fmt(F.otlpSink.bytes / 1e6)} MB in figures 1 and 2); "of off" = tracing on / off, same run.`
          : ''),
    );
  }

  // Figure 3
  /** Viewers the relay closed during a run (keepalive missed, cut as slow…): max over its runs. */
  const cutOf = (x) => Math.max(x.normal.throughput.closedViewers ?? 0, x.normal.rate.closedViewers ?? 0);
  if (F.fanout) {
    const rows = [];
    for (const [n, byKind] of Object.entries(F.fanout)) {
      const s = (kind, f) => spread((byKind[kind] ?? []).map(f));
      const bd = s('raw', (x) => x.normal.throughput.deliveriesPerSec);
      const od = s('ours', (x) => x.normal.throughput.deliveriesPerSec);
      const r = ratio(od.median, bd.median);
      const b99 = s('raw', (x) => x.normal.rate.latency.p99);
      const o99 = s('ours', (x) => x.normal.rate.latency.p99);
      const r99 = ratio(o99.median, b99.median);
      const missing = s('ours', (x) => x.normal.rate.missing).max;
      const okD = verdict(`3 fan-out deliveries/s at ${n}`, '≥ 70 % of raw broadcast', rfmt(r), r >= 0.7);
      let okL;
      if (Number(n) === 1000)
        okL = verdict(
          '3 fan-out 1000 viewers @20 fps',
          'every frame to every viewer, p99 ≤ 1.5×',
          `missing ${missing}, p99 ${rfmt(r99)}`,
          missing === 0 && r99 <= 1.5,
        );
      rows.push([
        n,
        cell(bd),
        cell(od),
        rfmt(r),
        `${cell(s('raw', (x) => x.normal.rate.latency.p50 / 1000))} / ${cell(s('raw', (x) => x.normal.rate.latency.p99 / 1000))}`,
        `${cell(s('ours', (x) => x.normal.rate.latency.p50 / 1000))} / ${cell(s('ours', (x) => x.normal.rate.latency.p99 / 1000))}`,
        rfmt(r99),
        `${fmt(s('raw', (x) => x.normal.rate.missing).max)} / ${fmt(missing)}`,
        `${cell(s('raw', (x) => x.normal.throughput.relayCpuUsPerDelivery))} / ${cell(s('ours', (x) => x.normal.throughput.relayCpuUsPerDelivery))}`,
        `${cell(s('raw', (x) => x.attachSeconds))} / ${cell(s('ours', (x) => x.attachSeconds))}`,
        `${fmt(s('raw', cutOf).max)} / ${fmt(s('ours', cutOf).max)}`,
        `${yes(okD)}${okL === undefined ? '' : ` · latency ${yes(okL)}`}`,
      ]);
    }
    parts.push(
      `### Figure 3: fan-out, one session streaming 200-byte frames to N viewers (WebSocket); baseline: raw ws broadcast relay\n\n` +
        table(
          [
            'viewers',
            'raw deliveries/s',
            'Tether deliveries/s',
            'ratio',
            'raw p50 / p99 ms @20 fps',
            'Tether p50 / p99 ms @20 fps',
            'p99 ratio',
            'frames missed raw / Tether',
            'relay CPU µs/delivery raw / Tether',
            'attach until quiet, s raw / Tether',
            'viewers cut raw / Tether',
            'target ≥ 0.70×; at 1000: all frames, p99 ≤ 1.5×',
          ],
          rows,
        ),
    );
  }
  if (F.slowViewer) {
    const rows = [];
    for (const kind of ['raw', 'ours']) {
      const runs = F.slowViewer[kind] ?? [];
      if (!runs.length) continue;
      const s = (f) => spread(runs.map(f));
      const metrics = [
        ['deliveries/s', (x) => x.throughput.deliveriesPerSec],
        ['p50 ms @20 fps', (x) => x.rate.latency.p50 / 1000],
        ['p99 ms @20 fps', (x) => x.rate.latency.p99 / 1000],
      ];
      for (const [name, f] of metrics) {
        const a = s((x) => f(x.normal));
        const b = s((x) => f(x.withSlow));
        const ch = ratio(b.median, a.median);
        const worse = name === 'deliveries/s' ? 1 / ch : ch;
        let ok;
        if (kind === 'ours') ok = verdict(`3 slow viewer: ${name}`, 'others change ≤ 10 %', pct(ch), worse <= 1.1);
        rows.push([kind === 'ours' ? 'Tether' : 'raw broadcast', name, cell(a), cell(b), pct(ch), yes(ok)]);
      }
      const missed = s((x) => x.withSlow.rate.missing).max;
      rows.push([
        kind === 'ours' ? 'Tether' : 'raw broadcast',
        'frames missed by the others',
        fmt(s((x) => x.normal.rate.missing).max),
        fmt(missed),
        '',
        '',
      ]);
      rows.push([
        kind === 'ours' ? 'Tether' : 'raw broadcast',
        'relay RSS MB at the end (slow viewer still attached)',
        '',
        cell(s((x) => (x.slowRelayMem?.rss ?? NaN) / 1e6)),
        '',
        '',
      ]);
    }
    parts.push(
      `### Figure 3b: one viewer that stops reading, among ${results.config.slow.n} (its frames queue at the relay)\n\n` +
        table(['relay', 'figure of the other viewers', 'without', 'with the slow viewer', 'change', 'target ≤ 10 %'], rows),
    );
  }

  // Figure 5
  if (F.clusterFanout) {
    const rows = [];
    for (const [n, byKind] of Object.entries(F.clusterFanout)) {
      const s = (kind, f) => spread((byKind[kind] ?? []).map(f));
      const both = (f, show = cell) => `${show(s('ours', f))} / ${show(s('cluster', f))}`;
      const one = s('ours', (x) => x.normal.throughput.deliveriesPerSec);
      const three = s('cluster', (x) => x.normal.throughput.deliveriesPerSec);
      const missed = (x) => x.normal.rate.missing + x.normal.throughput.missing;
      rows.push([
        n,
        cell(one),
        cell(three),
        rfmt(ratio(three.median, one.median)),
        both((x) => x.normal.rate.latency.p50 / 1000),
        both((x) => x.normal.rate.latency.p99 / 1000),
        both(missed, (v) => fmt(v.max)),
        both((x) => x.normal.throughput.relayCpuUsPerDelivery),
        cell(s('cluster', (x) => x.normal.throughput.othersCpuUsPerDelivery)),
        both((x) => x.attachSeconds),
        both(cutOf, (v) => fmt(v.max)),
      ]);
    }
    parts.push(
      `### Figure 5: fan-out over three gateways on one NATS server (JetStream): the session's agent and controller on gateway 1, viewers spread evenly over the three; against one gateway with every viewer (figure 3's setup), same run\n\n` +
        table(
          [
            'viewers',
            '1 gateway deliveries/s',
            '3 gateways deliveries/s',
            'ratio',
            'p50 ms @20 fps 1 / 3',
            'p99 ms @20 fps 1 / 3',
            'frames missed 1 / 3',
            'gateway CPU µs/delivery (sum) 1 / 3',
            'NATS CPU µs/delivery',
            'attach until quiet, s 1 / 3',
            'viewers cut 1 / 3',
          ],
          rows,
        ),
    );
  }

  // Figure 4
  if (F.idle) {
    const rows = [];
    for (const t of ['ws', 'grpc']) {
      for (const x of F.idle.clients[t] ?? []) {
        const r = ratio(x.ours.rssKB, x.raw.rssKB);
        const ok = verdict(
          `4 idle attached client ${t} at ${x.ours.n}`,
          '≤ 40 KB gateway memory',
          `${fmt(x.ours.rssKB)} KB RSS (heap ${fmt(x.ours.heapKB)} KB)`,
          x.ours.rssKB <= 40,
        );
        const burst = (m) => (m.burst ? `; ${fmt(m.burst.rssKB)} at 0.5 s` : '');
        rows.push([
          `idle attached client, ${t === 'ws' ? 'WebSocket' : 'gRPC'}`,
          x.ours.n,
          `${fmt(x.raw.rssKB)} (heap ${fmt(x.raw.heapKB)}${burst(x.raw)})`,
          `${fmt(x.ours.rssKB)} (heap ${fmt(x.ours.heapKB)}${burst(x.ours)})`,
          rfmt(r),
          `≤ 40 KB: ${yes(ok)}`,
        ]);
      }
    }
    const agent = F.idle.agent;
    for (const x of F.idle.sessions ?? []) {
      const sum = agent ? x.rssKB + agent.agent.rssKB : NaN;
      const ok = agent
        ? verdict(
            `4 idle session at ${x.n}`,
            '≤ 150 KB gateway + agent',
            `${fmt(x.rssKB)} + ${fmt(agent.agent.rssKB)} = ${fmt(sum)} KB`,
            sum <= 150,
          )
        : undefined;
      rows.push([
        `idle session, gateway (agent: ${agent ? fmt(agent.agent.rssKB) : 'n/a'} KB)`,
        x.n,
        '',
        `${fmt(x.rssKB)} (heap ${fmt(x.heapKB)})`,
        '',
        `gateway + agent ${fmt(sum)} KB ≤ 150 KB: ${yes(ok)}`,
      ]);
    }
    if (agent)
      rows.push([
        `idle session, agent (engine excluded; gateway in the same run ${fmt(agent.gateway.rssKB)} KB)`,
        agent.n,
        '',
        `${fmt(agent.agent.rssKB)} (heap ${fmt(agent.agent.heapKB)})`,
        '',
        '',
      ]);
    parts.push(
      `### Figure 4: idle cost, KB per connection / session (RSS growth after GC, clients read after 10 s idle; heap = V8 heap + external; at 0.5 s: RSS right after opening them)\n\n` +
        table(['what', 'count', 'raw ws / grpc connection KB', 'Tether KB', 'ratio', 'target'], rows),
    );
  }

  if (F.levers) {
    const b = spread(F.levers.buffer);
    const rows = [
      ['received Buffer, as is (the raw relay)', cell(b), 'baseline'],
      ['a string per frame (encoded per client)', cell(spread(F.levers.string)), rfmt(ratio(spread(F.levers.string).median, b.median))],
      [
        'a string + callback + promise per client (like core/channel/ws.ts write())',
        cell(spread(F.levers.promise)),
        rfmt(ratio(spread(F.levers.promise).median, b.median)),
      ],
    ];
    parts.push(
      `### Levers: the raw ws broadcast relay, 100 viewers, 330-byte frames, sending…\n\n` +
        table(['each frame to each viewer as', 'relay CPU µs/delivery', 'ratio'], rows),
    );
  }

  if (F.profile) {
    for (const [name, p] of Object.entries(F.profile)) {
      if (!p.topSelf) continue;
      const rows = p.topSelf.slice(0, 15).map((e) => [e.name, `${e.pct} %`]);
      const ours = p.oursInclusive.slice(0, 15).map((e) => [e.name, `${e.pct} %`]);
      parts.push(
        `### CPU profile, ${name} (busy ${p.busyMs} ms)\n\n` +
          table(['top self time', 'share of busy'], rows) +
          '\n\n' +
          table(['our functions, inclusive', 'share of busy'], ours) +
          '\n\n' +
          table(
            ['by file (self)', 'share of busy'],
            p.byFile.slice(0, 12).map((e) => [e.name, `${e.pct} %`]),
          ),
      );
    }
  }

  if (F.web) {
    parts.push(
      `### Web page: a 2,000-turn session beside a 2-turn one and a control page with no Tether code (Chromium, medians of ${F.web.long.length})\n\n${webTable(F.web)}`,
    );
    for (const v of webVerdicts(F.web)) verdict('web', v.target, v.value, v.met);
  }
  parts.push(...lifecycleTables(F, { table, cell }));
  const met = verdicts.filter((v) => v.met).length;
  parts.push(
    `### Targets: ${met} of ${verdicts.length} met\n\n` +
      table(
        ['figure', 'target', 'value', 'met'],
        verdicts.map((v) => [v.figure, v.target, v.value, yes(v.met)]),
      ),
  );
  if (results.notes.length) parts.push(`Notes:\n${results.notes.map((n) => `- ${n}`).join('\n')}`);
  parts.push(`Run took ${results.seconds?.toFixed(0)} s.`);
  const markdown = parts.join('\n\n') + '\n';
  return { text: markdown, markdown, verdicts };
}
