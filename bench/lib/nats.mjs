/**
 * A NATS server with JetStream for the cluster figure: Debian's `nats-server` (or
 * `$TETHER_TEST_NATS_SERVER`), on 127.0.0.1, a free port (read from its log), a store folder
 * of its own, removed at stop. Started and stopped like a bench child (`call('cpu')`,
 * `stop()`), and killed with them if the runner dies.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adopt } from './proc.mjs';

const DEBIAN_PATH = '/usr/sbin/nats-server';
const READY_LINE = 'Server is ready';
const LISTEN_LINE = /Listening for client connections on [^\s]*:(\d+)/;
const START_TIMEOUT_MS = 15_000;
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim()) || 100;

/** The server binary, or undefined when it is not installed. */
export function natsServerBinary() {
  if (process.env.TETHER_TEST_NATS_SERVER) return process.env.TETHER_TEST_NATS_SERVER;
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(join(dir, 'nats-server'))) return join(dir, 'nats-server');
  return existsSync(DEBIAN_PATH) ? DEBIAN_PATH : undefined;
}

/** Starts the server; resolves once it is ready, with `url` (nats://127.0.0.1:PORT). */
export async function startNats() {
  const bin = natsServerBinary();
  if (!bin) throw new Error('nats-server is not installed (apt-get install nats-server)');
  const store = mkdtempSync(join(tmpdir(), 'tether-bench-nats-'));
  const proc = spawn(bin, ['-js', '-a', '127.0.0.1', '-p', '-1', '-sd', store], { stdio: ['ignore', 'pipe', 'pipe'] });
  adopt(proc, 'nats-server');
  const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  let log = '';
  for (const s of [proc.stdout, proc.stderr]) s.on('data', (d) => (log = (log + d.toString()).slice(-8000)));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    const t = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(t);
    rmSync(store, { recursive: true, force: true });
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!log.includes(READY_LINE)) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`nats-server did not start: ${log.trim().slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const port = Number(LISTEN_LINE.exec(log)?.[1]);
  return {
    label: 'nats-server',
    pid: proc.pid,
    url: `nats://127.0.0.1:${port}`,
    /** Like a bench child's `cpu`: µs of user + system time so far. */
    call: async (cmd) => {
      if (cmd !== 'cpu') throw new Error(`nats-server: no ${cmd}`);
      const fields = readFileSync(`/proc/${proc.pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return { total: ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS };
    },
    stop,
  };
}
