/**
 * The child side of the runner's IPC: every bench process (gateway, agent, relays, driver)
 * is started by bench/run.mjs with an IPC channel, announces itself with `ready`, answers
 * `{id, cmd, args}` calls and exits when told to, when the runner goes away, or after a hard
 * lifetime cap, so nothing it started outlives the benchmark.
 */
import v8 from 'node:v8';

const MAX_LIFETIME_MS = Number(process.env.BENCH_CHILD_MAX_MS ?? 20 * 60_000);

/** Memory of this process after a full GC (needs --expose-gc). */
export async function memory() {
  for (let i = 0; i < 4; i++) {
    globalThis.gc?.();
    await new Promise((r) => setTimeout(r, 20));
  }
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers };
}

/**
 * V8's heap spaces after a full GC (used bytes per space), and a heap snapshot written to
 * `snapshot` when given: what figure 4's idle memory is made of, read on request.
 */
export async function heap({ snapshot } = {}) {
  await memory();
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size]));
  const file = snapshot ? v8.writeHeapSnapshot(snapshot) : undefined;
  return { spaces, snapshot: file };
}

/** CPU time of this process so far, in µs (user + system). */
export function cpu() {
  const c = process.cpuUsage();
  return { user: c.user, system: c.system, total: c.user + c.system };
}

/**
 * Serves calls from the runner. `handlers[cmd](args)` may return a value or a promise.
 * Built in: `cpu`, `mem`, `exit` (runs `onExit` first, bounded to 5 s).
 */
export function serve(handlers, { onExit } = {}) {
  if (!process.send) throw new Error('bench children must be started by bench/run.mjs (no IPC channel)');
  let exiting = false;
  const exit = async (code = 0) => {
    if (exiting) return;
    exiting = true;
    const force = setTimeout(() => process.exit(code), 5_000);
    force.unref();
    try {
      await onExit?.();
    } catch {
      // exiting anyway
    }
    process.exit(code);
  };
  const all = { cpu, mem: memory, heap, ...handlers, exit: () => setImmediate(() => void exit(0)) };
  process.on('message', async (msg) => {
    if (!msg || typeof msg !== 'object' || msg.id === undefined) return;
    const h = all[msg.cmd];
    try {
      if (!h) throw new Error(`unknown command ${msg.cmd}`);
      const result = await h(msg.args ?? {});
      process.send?.({ id: msg.id, ok: true, result: result ?? null });
    } catch (err) {
      process.send?.({ id: msg.id, ok: false, error: err instanceof Error ? `${err.message}` : String(err) });
    }
  });
  process.on('disconnect', () => void exit(0));
  process.on('SIGTERM', () => void exit(0));
  process.on('SIGINT', () => void exit(0));
  setTimeout(() => void exit(3), MAX_LIFETIME_MS).unref();
  return { ready: (info = {}) => process.send?.({ ready: true, pid: process.pid, ...info }) };
}

/** `--name value` pairs of argv as an object. */
export function argsOf(argv = process.argv.slice(2)) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) continue;
    const key = argv[i].slice(2);
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) out[key] = true;
    else {
      out[key] = next;
      i++;
    }
  }
  return out;
}

/** hrtime in µs (CLOCK_MONOTONIC: the same clock in every process on the machine). */
export const nowUs = () => Number(process.hrtime.bigint()) / 1000;
