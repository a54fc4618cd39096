/**
 * The driver's clients for the lifecycle figures (bench/lifecycle.mjs): a link cut and its
 * resume, an agent's fail-over seen from a client, a late joiner's catch-up, and many
 * sessions on one agent. Every client is the GatewayClient library, as an app would use it.
 * Frames are told apart by the `~i=<index>~t=<µs>~` marks the stand-in engine writes (its
 * stream index and the hrtime it was written at), so a frame missing or delivered twice shows.
 */
import { GatewayClient } from '../../dist/client/gateway-client.js';
import { nowUs } from './child.mjs';
import { startCutProxy, viaPort } from './cut-proxy.mjs';
import { holdsUpTo, marksOf, tally } from './frame-count.mjs';
import { summarize } from './stats.mjs';

const userLine = (text) => ({ type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: 'default' });
/** A stream asked of the stand-in engine as a prompt (`bench_stream` or `bench_mix`, bench/echo-engine.mjs). */
const benchRequest = (kind, fields) => userLine(`${kind} ${JSON.stringify(fields)}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Resolves with `p`, or rejects with `what` after `ms`. */
function bounded(p, ms, what) {
  let t;
  return Promise.race([p, new Promise((_, reject) => (t = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms)))]).finally(
    () => clearTimeout(t),
  );
}

/** A promise with its resolve function outside. */
function signal() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Reads a session in the background: counts every marked frame by its index (`got`), calls
 * `onMark` for each, and `onLine` for every engine line.
 */
function track(session) {
  const st = { got: new Map(), onMark: undefined, onLine: undefined };
  void (async () => {
    try {
      for await (const item of session) {
        if (item.kind !== 'engine') continue;
        st.onLine?.(item.line);
        const m = marksOf(item.line);
        if (!m) continue;
        st.got.set(m.i, (st.got.get(m.i) ?? 0) + 1);
        st.onMark?.(m);
      }
    } catch {
      // the session or the client closed
    }
  })();
  return st;
}

/**
 * Reconnect: one client behind a cut proxy streams `count` frames at `rate`/s; after
 * `cutAfter` of them the proxy cuts the link. `resumedMs`: cut → the client holds every frame
 * the engine wrote before the cut and the first one written after it (its own reconnect,
 * backoff included, and the resume from its last seq). After each cut, the baseline: a fresh
 * GatewayClient connects and attaches to the same session at its live edge. No new cut after
 * `stopAt` (epoch ms: the runner's time budget).
 */
export async function reconnectCuts({ url, agent, cuts, stopAt = Infinity, count = 200, rate = 250, cutAfter = 20 }) {
  const proxy = await startCutProxy(Number(new URL(url).port));
  let onDown;
  const client = await GatewayClient.connect({ gateway: viaPort(url, proxy.port), onStatus: (s) => s.state === 'down' && onDown?.() });
  const out = { cuts: [], fresh: [] };
  try {
    const session = await client.createSession({ agent });
    const st = track(session);
    for (let k = 0; k < cuts && Date.now() < stopAt; k++) {
      st.got.clear();
      const armed = signal();
      const caught = signal();
      const all = signal();
      let cutAt = 0;
      let down = false;
      let firstUs = 0;
      let caughtUs = 0;
      onDown = () => (down = cutAt > 0);
      st.onMark = (m) => {
        const now = nowUs();
        if (!cutAt && st.got.size >= cutAfter) armed.resolve();
        if (cutAt && down && !firstUs) firstUs = now;
        // Caught up: every frame up to one the engine wrote after the cut (or, if the stream
        // ended before the resume, every frame of it).
        if (cutAt && !caughtUs && (m.t >= cutAt || st.got.size >= count) && holdsUpTo(st.got, Math.max(m.i, st.got.size - 1))) {
          caughtUs = now;
          caught.resolve();
        }
        if (st.got.size >= count) all.resolve();
      };
      void session.send(benchRequest('bench_stream', { count, bytes: 200, rate })).catch(() => {});
      await bounded(armed.promise, 10_000, `cut ${k}: ${cutAfter} frames not received`);
      cutAt = nowUs();
      proxy.cut();
      await bounded(caught.promise, 20_000, `cut ${k}: not resumed with every frame`);
      await bounded(all.promise, (count / rate) * 1000 + 10_000, `cut ${k}: stream not complete`).catch(() => {});
      out.cuts.push({ resumedMs: (caughtUs - cutAt) / 1000, firstFrameMs: (firstUs - cutAt) / 1000, ...tally(st.got, count) });
      const t0 = nowUs();
      const fresh = await GatewayClient.connect({ gateway: url });
      try {
        await fresh.attach(session.id, { fromSeq: session.lastSeq + 1, readOnly: true });
        out.fresh.push((nowUs() - t0) / 1000);
      } finally {
        await fresh.close();
      }
    }
  } finally {
    onDown = undefined;
    await client.close();
    await proxy.close();
  }
  return out;
}

/** The client of the fail-over figure between `failoverArm` and `failoverWait`. */
let armed;

/**
 * Fail-over, first half: a client on a gateway that will survive (`url`) opens a session on
 * `agent` and starts a stream of `count` frames at `rate`/s. Resolves once `cutAfter` of them
 * arrived, with `freshMs` (connect + create + the first frame: a fresh start, for comparison).
 */
export async function failoverArm({ url, agent, count, rate = 250, cutAfter = 20 }) {
  const t0 = nowUs();
  const client = await GatewayClient.connect({ gateway: url });
  try {
    const session = await client.createSession({ agent });
    const st = track(session);
    const first = signal();
    const enough = signal();
    st.onMark = () => {
      first.resolve(nowUs());
      if (st.got.size >= cutAfter) enough.resolve();
    };
    void session.send(benchRequest('bench_stream', { count, bytes: 200, rate })).catch(() => {});
    const firstUs = await bounded(first.promise, 30_000, 'fail-over: no first frame');
    await bounded(enough.promise, 10_000, `fail-over: ${cutAfter} frames not received`);
    armed = { client, st, count, rate };
    return { sessionId: session.id, freshMs: (firstUs - t0) / 1000 };
  } catch (err) {
    await client.close();
    throw err;
  }
}

/**
 * Fail-over, second half (the runner killed the gateway holding the agent at `killedAtUs`):
 * the first frame the engine wrote after the kill reaches the client, on its gateway, through
 * the agent's new link. Then the rest of the stream, counted.
 */
export async function failoverWait({ killedAtUs, timeoutMs = 30_000 }) {
  if (!armed) throw new Error('failoverWait before failoverArm');
  const { client, st, count, rate } = armed;
  armed = undefined;
  try {
    const after = signal();
    const all = signal();
    st.onMark = (m) => {
      if (m.t >= killedAtUs) after.resolve(nowUs());
      if (st.got.size >= count) all.resolve();
    };
    const at = await bounded(after.promise, timeoutMs, 'fail-over: no frame through another gateway');
    await bounded(all.promise, (count / rate) * 1000 + 10_000, 'fail-over: stream not complete').catch(() => {});
    return { ms: (at - killedAtUs) / 1000, ...tally(st.got, count) };
  } finally {
    await client.close();
  }
}

/**
 * Late joiner: a session of `count` frames of the realistic mix (the engine's bench_mix) is
 * written and read by its creator; then a new client connects and attaches from the
 * beginning. `ms`: connect → the last frame in hand (every one before it counted).
 */
export async function lateJoin({ url, agent, count }) {
  const owner = await GatewayClient.connect({ gateway: url });
  try {
    const session = await owner.createSession({ agent });
    const st = track(session);
    const written = signal();
    st.onMark = () => st.got.size >= count && written.resolve();
    void session.send(benchRequest('bench_mix', { count })).catch(() => {});
    await bounded(written.promise, 120_000, `late joiner: ${count} frames not written`);
    const t0 = nowUs();
    const joiner = await GatewayClient.connect({ gateway: url });
    try {
      const joined = await joiner.attach(session.id, { readOnly: true });
      const jt = track(joined);
      let bytes = 0;
      jt.onLine = (line) => (bytes += line.length);
      const last = signal();
      jt.onMark = (m) => m.i === count - 1 && last.resolve(nowUs());
      const t1 = await bounded(last.promise, 120_000, 'late joiner: last frame not received');
      return { ms: (t1 - t0) / 1000, frames: jt.got.size, mb: bytes / 1e6, ...tally(jt.got, count) };
    } finally {
      await joiner.close();
    }
  } finally {
    await owner.close();
  }
}

/** The sessions of the sessions-per-agent figure, kept open from one step to the next. */
const load = { client: undefined, sessions: [] };

/**
 * Sessions per agent, one step: grows to `n` sessions on `agent` (each with its own engine),
 * then every session runs prompts in a closed loop (one in flight, a pause of about `thinkMs`
 * between them) for `seconds`, longer (up to 4×) until `minSamples` round trips are in. The
 * round trips of all sessions, pooled; each session's first one (its engine warming up) left out.
 */
export async function loadStep({ url, agent, n, seconds, thinkMs = 20, minSamples = 200 }) {
  load.client ??= await GatewayClient.connect({ gateway: url });
  while (load.sessions.length < n) {
    const batch = Array.from({ length: Math.min(8, n - load.sessions.length) }, async () => {
      const session = await load.client.createSession({ agent });
      return { session, st: track(session) };
    });
    load.sessions.push(...(await Promise.all(batch)));
  }
  const samples = [];
  const t0 = nowUs();
  const more = () => {
    const spent = nowUs() - t0;
    return spent < seconds * 1e6 || (samples.length < minSamples && spent < 4 * seconds * 1e6);
  };
  const loop = async ({ session, st }) => {
    await sleep(Math.random() * thinkMs);
    for (let i = 0; more(); i++) {
      const echo = signal();
      st.onLine = (line) => line.startsWith('{"type":"assistant"') && echo.resolve();
      const sent = nowUs();
      void session.send(userLine(`ping ${i}`)).catch(() => {});
      await bounded(echo.promise, 10_000, `sessions per agent at ${n}: no echo`);
      if (i > 0) samples.push(nowUs() - sent);
      await sleep(thinkMs * (0.5 + Math.random()));
    }
  };
  await Promise.all(load.sessions.slice(0, n).map(loop));
  const s = summarize(samples);
  return { ...s, samples: s.n, n };
}

export async function loadClose() {
  const c = load.client;
  load.client = undefined;
  load.sessions = [];
  await c?.close();
  return {};
}
