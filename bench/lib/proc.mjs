/**
 * The runner side: starts bench children (optionally pinned to CPU 0 with `taskset -c 0`),
 * talks to them over IPC, and stops every one of them (also on SIGINT/SIGTERM and at exit).
 */
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

export const BENCH_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');

const live = new Set();

export const hasTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;

function killAll() {
  for (const c of live) {
    try {
      c.proc.kill('SIGKILL');
    } catch {
      // gone
    }
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killAll();
    process.exit(130);
  });
}

/**
 * The node flags `tether` runs with, from its built entry's `#!` line (bin/tether.ts says why):
 * our gateway and agent children run with them, as `tether gateway` and `tether agent` do.
 */
export function tetherNodeFlags(entry = join(BENCH_DIR, '..', 'dist', 'bin', 'tether.js')) {
  const first = readFileSync(entry, 'utf8').split('\n', 1)[0];
  const m = /^#!\/usr\/bin\/env(?: -S)? node((?: --\S+)*)\s*$/.exec(first);
  if (!m) throw new Error(`unexpected #! line in ${entry}: ${first}`);
  return m[1].trim().split(/\s+/).filter(Boolean);
}

/** Our programs among the children: they run with tetherNodeFlags(). */
const OURS = new Set(['tether-gateway.mjs', 'tether-agent.mjs']);

/**
 * Starts `bench/children/<script>` with IPC. Resolves once it sent `ready` (with whatever
 * info it attached), rejects if it exits or stays silent for `readyTimeoutMs`.
 */
export async function startChild(
  script,
  args = [],
  { pin = false, execArgv = [], env = {}, readyTimeoutMs = 20_000, label = script } = {},
) {
  const file = join(BENCH_DIR, 'children', script);
  const nodeArgs = ['--expose-gc', ...(OURS.has(script) ? tetherNodeFlags() : []), ...execArgv, file, ...args];
  const [cmd, argv] = pin && hasTaskset ? ['taskset', ['-c', '0', process.execPath, ...nodeArgs]] : [process.execPath, nodeArgs];
  const proc = spawn(cmd, argv, { stdio: ['ignore', 'inherit', 'pipe', 'ipc'], env: { ...process.env, ...env } });
  let stderr = '';
  proc.stderr.on('data', (d) => {
    stderr = (stderr + d.toString()).slice(-8000);
    if (process.env.BENCH_VERBOSE) process.stderr.write(`[${label}] ${d}`);
  });
  const pending = new Map();
  let nextId = 1;
  const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  const child = { proc, label, args, pid: proc.pid, info: undefined, stderrTail: () => stderr };
  live.add(child);
  void exited.then(() => {
    live.delete(child);
    for (const p of pending.values()) p.reject(new Error(`${label} exited: ${stderr.trim().split('\n').slice(-5).join(' | ')}`));
    pending.clear();
  });
  proc.on('message', (msg) => {
    if (msg?.ready) return child.onReady?.(msg);
    const p = pending.get(msg?.id);
    if (!p) return;
    pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.ok) p.resolve(msg.result);
    else p.reject(new Error(`${label}: ${msg.error}`));
  });
  child.call = (cmd, args = {}, timeoutMs = 60_000) =>
    new Promise((resolve, reject) => {
      if (!live.has(child)) return reject(new Error(`${label} is not running`));
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`${label}: ${cmd} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(id, { resolve, reject, timer });
      proc.send({ id, cmd, args });
    });
  child.stop = async (graceMs = 5_000) => {
    if (!live.has(child)) return exited;
    try {
      proc.send({ id: 0, cmd: 'exit' });
    } catch {
      // channel already gone
    }
    const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
    const r = await exited;
    clearTimeout(t);
    return r;
  };
  child.exited = exited;
  const info = await new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${label} did not start within ${readyTimeoutMs} ms: ${stderr.trim().slice(-2000)}`));
    }, readyTimeoutMs);
    child.onReady = (msg) => {
      clearTimeout(t);
      resolve(msg);
    };
    void exited.then(({ code, signal }) => {
      clearTimeout(t);
      reject(new Error(`${label} exited during start-up (code ${code}, signal ${signal}): ${stderr.trim().slice(-2000)}`));
    });
  });
  child.info = info;
  return child;
}

/**
 * Puts a process that is not a bench child (e.g. nats-server) under the same rule: killed
 * with the children when the runner exits or is interrupted.
 */
export function adopt(proc, label) {
  const entry = { proc, label };
  live.add(entry);
  proc.once('exit', () => live.delete(entry));
}

/** Stops children in parallel (bounded). */
export async function stopAll(children) {
  await Promise.all(children.filter(Boolean).map((c) => c.stop()));
}

/** How many children are still running (should be 0 at the end). */
export function liveCount() {
  return live.size;
}

/** The pid and every descendant of it (from /proc/<pid>/task/<tid>/children). */
export function processTree(pid) {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    let tasks = [];
    try {
      tasks = readdirSync(`/proc/${out[i]}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      try {
        for (const c of readFileSync(`/proc/${out[i]}/task/${t}/children`, 'utf8').split(/\s+/).filter(Boolean)) out.push(Number(c));
      } catch {
        // gone
      }
    }
  }
  return out;
}

/**
 * Pins running children, their threads and their descendants (engines) to `cpus`
 * ('0' pins to CPU 0; '0-1' or the full list unpins). Returns how many processes it set.
 */
export function setAffinity(children, cpus) {
  if (!hasTaskset) return 0;
  let n = 0;
  for (const c of children) {
    for (const pid of processTree(c.pid)) {
      if (spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' }).status === 0) n++;
    }
  }
  return n;
}

/** Every CPU of the machine, as taskset writes it. */
export const ALL_CPUS = `0-${cpus().length - 1}`;
