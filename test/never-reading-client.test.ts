/**
 * Issue 13, finding 3: every queue toward a peer is bounded. A client that pipelines
 * `sessions.list` and never reads used to grow the gateway past its heap limit (listings no
 * longer carry whole options, so it pipelines `session.info` now, the largest answer); replies now
 * count toward the same per-connection budget as session frames, the client is cut as a slow
 * consumer, and the gateway's memory stays flat. The gateway runs as its own process, so its
 * memory is measured alone (RSS from /proc, heap from its /metrics), against a baseline
 * taken in the same test.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startTether, type Daemon } from './support/cli.js';
import { rawClient } from './support/raw-client.js';
import { waitFor } from './support/wait.js';
import { cleanupsPerTest } from './support/cleanups.js';

/** The budget the gateway is started with (its default is 64 MiB; shrunk so the test is quick). */
const BUDGET_BYTES = 4 * 1024 * 1024;
/** Pipelined requests: with ~64 KB answers, far more than the budget (about 1.3 GB in all). */
const REQUESTS = 20_000;
/** Sessions whose options make each `session.info` answer large (options near their 64 KiB bound). */
const SESSIONS = 3;

/** Resident and peak-resident bytes of a process, from /proc. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

/** One sample of a Prometheus metric from the gateway's /metrics (0 when absent). */
async function metric(httpUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${httpUrl}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

const MiB = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

describe.each(['ws', 'grpc'] as const)('a client that pipelines session.info and never reads (%s)', (t) => {
  const cleanups = cleanupsPerTest();

  it('is cut as a slow consumer and the gateway memory stays flat', async () => {
    const state: TempDir = makeTempDir('tether-state-');
    const cwd: TempDir = makeTempDir('tether-cwd-');
    cleanups.push(
      () => state.cleanup(),
      () => cwd.cleanup(),
    );
    const gw: Daemon = startTether(['gateway', '--port', '0', '--grpc-port', '0', '--state-dir', state.path, '--auth', 'off'], {
      env: { TETHER_LIMITS_SLOW_CLIENT_BYTES: String(BUDGET_BYTES) },
    });
    cleanups.push(() => gw.stop('SIGKILL'));
    const wsUrl = (await gw.line('gateway: ')).slice('gateway: '.length);
    const grpcUrl = (await gw.line('grpc: ')).slice('grpc: '.length);
    const httpUrl = wsUrl.replace(/^ws/, 'http');
    const url = t === 'ws' ? wsUrl : grpcUrl;

    const agent = new Agent({ gateway: wsUrl, name: 'builder', engine: 'demo', cwd: cwd.path, eofGraceMs: 500, termGraceMs: 500 });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const owner = await GatewayClient.connect({ gateway: wsUrl, reconnect: false });
    cleanups.push(() => owner.close());
    const tools = Array.from({ length: 20 }, (_, n) => `Tool${n}${'x'.repeat(240)}`);
    let info = '{}';
    for (let n = 0; n < SESSIONS; n++) {
      const s = await owner.createSession({
        agent: 'builder',
        options: { system_prompt: `${n} ${'p'.repeat(30_000)}`, append_system_prompt: 'a'.repeat(28_000), allowed_tools: tools },
      });
      info = JSON.stringify({ session_id: s.id });
    }

    // Baseline: a well-behaved client asks the same thing, reading every answer.
    const polite = await rawClient(url, undefined);
    const answerBytes = JSON.stringify((await polite.call('session.info', info)).result).length;
    for (let n = 0; n < 20; n++) await polite.call('session.info', info);
    polite.close();
    const pid = gw.child.pid!;
    const before = memoryOf(pid);
    const heapBefore = await metric(httpUrl, 'nodejs_heap_size_used_bytes');

    // The attack: thousands of requests on a connection that never reads an answer.
    const rude = await rawClient(url, undefined, { read: false });
    let sent = 0;
    for (; sent < REQUESTS; sent++) {
      if (rude.channel.isClosed) break;
      await rude.fire('session.info', info).catch(() => {});
    }
    await waitFor(
      async () => (await metric(httpUrl, 'tether_slow_client_disconnects_total')) >= 1,
      30_000,
      'the gateway to cut the client',
    );
    const after = memoryOf(pid);
    const heapAfter = await metric(httpUrl, 'nodejs_heap_size_used_bytes');
    rude.close();

    const growth = Math.max(0, after.peak - before.rss);
    console.log(
      `never-reading ${t} client: ${sent} requests of ~${MiB(answerBytes)} answers (${MiB(sent * answerBytes)} asked for); ` +
        `gateway RSS ${MiB(before.rss)} -> peak ${MiB(after.peak)} (growth ${MiB(growth)}), heap used ${MiB(heapBefore)} -> ${MiB(heapAfter)}`,
    );
    // Bounded by the budget plus a few answers in flight, not by what was asked for: the
    // gateway's memory stays within its own baseline.
    expect(growth).toBeLessThan(before.rss);
    expect(heapAfter - heapBefore).toBeLessThan(before.rss); // heap samples move with GC timing: a loose bound, far below what was asked for
    // The attack asked for far more than that (the client is cut, and stops sending, after
    // ~9,000-20,000 answers of ~60 KB: 0.5-1.3 GB, against a gateway of ~110-150 MB RSS).
    expect(sent * answerBytes).toBeGreaterThan(3 * before.rss);
    // The gateway still serves everyone else.
    expect((await owner.listSessions()).length).toBe(SESSIONS);
  }, 90_000);
});
