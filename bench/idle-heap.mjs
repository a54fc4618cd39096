#!/usr/bin/env node
/**
 * What one idle client costs the gateway's heap, by kind of object: heap snapshots of the
 * gateway (or of the raw relay) before and after N idle clients open, as figure 4 opens them
 * (the bench's driver; ours attached 100 to a session), and the difference per client by
 * constructor (objects, closures, arrays, strings, and "(native)": memory outside the JS heap
 * that V8 is told of, nghttp2's for gRPC). Figure 4 gives RSS; this says whose objects it is.
 *
 *   node bench/idle-heap.mjs [--clients 500] [--transport grpc|ws] [--raw] [--top 40]
 *
 * The snapshots (hundreds of MB) are written to a temporary folder and removed.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { argsOf } from './lib/child.mjs';
import { startChild, stopAll } from './lib/proc.mjs';
import { helpAndExit } from './lib/usage.mjs';

helpAndExit(import.meta.url);

const a = argsOf();
const N = Number(a.clients ?? 500);
const transport = a.transport === 'ws' ? 'ws' : 'grpc';
const RAW = a.raw === true;
const TOP = Number(a.top ?? 40);
const PER_SESSION = 100;

/** Self size and count of each kind of node in a .heapsnapshot. */
function kindsOf(file) {
  const s = JSON.parse(readFileSync(file, 'utf8'));
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const [iType, iName, iSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const kinds = new Map();
  for (let i = 0; i < s.nodes.length; i += fields.length) {
    const type = types[s.nodes[i + iType]];
    const name = s.strings[s.nodes[i + iName]];
    const kind = type === 'object' ? name : type === 'closure' ? `closure ${name}`.trim() : `(${type})`;
    const k = kinds.get(kind) ?? { n: 0, bytes: 0 };
    k.n++;
    k.bytes += s.nodes[i + iSize];
    kinds.set(kind, k);
  }
  return kinds;
}

const dir = mkdtempSync(join(tmpdir(), 'tether-idle-heap-'));
const gw = RAW
  ? await startChild('raw-relay.mjs', ['--transport', transport], { label: 'raw-relay' })
  : await startChild('tether-gateway.mjs', [], { label: 'gateway' });
const fake = RAW ? undefined : await startChild('fake-agent.mjs', ['--gateway', gw.info.url, '--name', 'fake'], { label: 'fake-agent' });
const driver = await startChild('driver.mjs', [], { label: 'driver' });
const url = RAW || transport === 'ws' ? gw.info.url : gw.info.grpcUrl;
const kind = `${RAW ? 'raw' : 'ours'}-${transport}`;
try {
  const sessionIds = RAW
    ? undefined
    : (await driver.call('sessionsCreate', { url: gw.info.url, agent: 'fake', n: Math.ceil(N / PER_SESSION) }, 120_000)).ids;
  // Warm-up: code paths compiled before the first snapshot, as figure 4 does.
  await driver.call('idleOpen', { kind, url, sessionIds, n: 50 }, 60_000);
  await driver.call('idleClose');
  await new Promise((r) => setTimeout(r, 2_000));
  const before = (await gw.call('heap', { snapshot: join(dir, 'before.heapsnapshot') })).snapshot;
  await driver.call('idleOpen', { kind, url, sessionIds, n: N }, 300_000);
  await new Promise((r) => setTimeout(r, 3_000));
  const after = (await gw.call('heap', { snapshot: join(dir, 'after.heapsnapshot') })).snapshot;
  await driver.call('idleClose');
  const k0 = kindsOf(before);
  const k1 = kindsOf(after);
  const rows = [...k1].map(([name, k]) => {
    const o = k0.get(name) ?? { n: 0, bytes: 0 };
    return { name, n: (k.n - o.n) / N, bytes: (k.bytes - o.bytes) / N };
  });
  rows.sort((x, y) => y.bytes - x.bytes);
  const total = rows.reduce((t, r) => t + r.bytes, 0);
  const native = rows.find((r) => r.name === '(native)')?.bytes ?? 0;
  console.log(
    `${kind}, ${N} idle clients: ${(total / 1024).toFixed(1)} KB per client in the heap snapshot, ${(native / 1024).toFixed(1)} KB of it "(native)"`,
  );
  console.log('  bytes  count  kind (per client)');
  for (const r of rows.slice(0, TOP))
    console.log(`${r.bytes.toFixed(0).padStart(7)} ${r.n.toFixed(2).padStart(6)}  ${r.name.slice(0, 80)}`);
} finally {
  await stopAll([driver, fake, gw].filter(Boolean));
  rmSync(dir, { recursive: true, force: true });
}
