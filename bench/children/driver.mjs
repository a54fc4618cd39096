/**
 * The load generator. Every client the benchmark uses lives here, in its own process (so
 * the runner can pin it with the rest): latency and throughput clients of our stack (the
 * GatewayClient library, over ws:// or grpc://) and of the raw relays, the direct stdio pipe
 * to the engine, fan-out viewers, and idle connections. Timing uses process.hrtime, the same
 * monotonic clock the engine stamps its frames with.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import { GatewayClient } from '../../dist/client/gateway-client.js';
import { startTelemetry } from '../../dist/core/telemetry/telemetry.js';
import { dialGrpc } from '../../dist/core/link/dial-grpc.js';
import { RpcPeer } from '../../dist/core/rpc/peer.js';
import { PROTOCOL_VERSION } from '../../dist/core/protocol/version.js';
import { nowUs, serve } from '../lib/child.mjs';
import { failoverArm, failoverWait, lateJoin, loadClose, loadStep, reconnectCuts } from '../lib/lifecycle-clients.mjs';
import { openRawGrpc } from '../lib/raw-grpc.mjs';
import { summarize } from '../lib/stats.mjs';
import { connectChannelWire, connectWire } from '../lib/wire.mjs';

const ENGINE = fileURLToPath(new URL('../echo-engine.mjs', import.meta.url));
const handles = new Map();

/** An engine assistant line as it appears inside a session.frame envelope (embedded as it is). */
const ASSISTANT_IN_ENVELOPE = '"message":{"type":"assistant"';
const isAssistantBuf = (b) => b[9] === 0x61 && b[10] === 0x73; // {"type":"as…
const userLine = (text) => ({ type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: 'default' });
/** Asks the echo engine for a stream: a prompt, since the gateway sends the engine only the controls it knows (core/engine-controls.ts). */
const streamLine = (count, bytes, rate) => userLine(`bench_stream ${JSON.stringify({ count, bytes, ...(rate ? { rate } : {}) })}`);

/** Splits a byte stream into lines (Buffers) and calls onLine for each. */
function lineReader(onLine) {
  let carry = null;
  return (chunk) => {
    const buf = carry ? Buffer.concat([carry, chunk]) : chunk;
    let start = 0;
    let nl;
    while ((nl = buf.indexOf(10, start)) >= 0) {
      onLine(buf.subarray(start, nl));
      start = nl + 1;
    }
    carry = start < buf.length ? buf.subarray(start) : null;
  };
}

/** A process speaking the engine protocol on stdio (the engine itself, or ssh to it). */
async function openStdio(cmd, args) {
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'ignore'] });
  child.stdin.on('error', () => {});
  const h = { kind: 'stdio', child, onItem: () => {} };
  let initDone;
  const init = new Promise((r) => (initDone = r));
  child.stdout.on(
    'data',
    lineReader((line) => {
      if (initDone && line.includes('tether_agent_init')) {
        initDone();
        initDone = undefined;
        return;
      }
      h.onItem(line);
    }),
  );
  h.send = (obj) => child.stdin.write(JSON.stringify(obj) + '\n');
  h.isFrame = isAssistantBuf;
  h.close = () => child.kill('SIGKILL');
  h.send({ type: 'control_request', request_id: 'tether_agent_init', request: { subtype: 'initialize', hooks: null } });
  const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await Promise.race([init, new Promise((_, rej) => child.once('exit', () => rej(new Error(`${cmd} exited before initialize`))))]);
  clearTimeout(t);
  return h;
}

/** A client socket on a raw ws relay, once open; its later errors end in its close. */
async function openRawWs(url) {
  const ws = new WebSocket(`${url}/client`, { perMessageDeflate: false, maxPayload: 64 * 1024 * 1024, handshakeTimeout: 10_000 });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  ws.on('error', () => {});
  return ws;
}

/** `otlp`: tracing on, exporting to that collector (the "tracing on" runs), as OTEL_EXPORTER_OTLP_ENDPOINT would. */
async function open({ id, kind, url, agent, otlp }) {
  let h;
  if (kind === 'ours') {
    // Reconnects (and re-attaches) like any client would; every drop is counted and reported.
    const link = { drops: 0, last: '' };
    const client = await GatewayClient.connect({
      telemetry: otlp
        ? await startTelemetry('tether-client', { OTEL_EXPORTER_OTLP_ENDPOINT: otlp, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })
        : undefined,
      gateway: url,
      onStatus: (st) => {
        if (st.state === 'down') {
          link.drops++;
          link.last = st.error.message;
        }
      },
    });
    const session = await client.createSession({ agent });
    h = { kind, client, session, link, onItem: () => {} };
    h.send = (obj) => void session.send(obj).catch(() => {});
    // The same cheap test as the raw clients' (they look at two bytes, parse nothing): an app
    // that wants the parsed line asks for `item.message`, and pays the JSON.parse on both sides alike.
    h.isFrame = (item) => item.kind === 'engine' && item.line.startsWith('{"type":"as');
    h.close = () => client.close();
    h.gaps = 0;
    void (async () => {
      try {
        for await (const item of session) {
          if (item.kind === 'event' && item.event.subtype === 'gap') h.gaps++;
          h.onItem(item);
        }
      } catch {
        // closed
      }
    })();
  } else if (kind === 'wire') {
    // Our protocol by hand over our transport layer: what the gateway + agent cost without the
    // client library (no RpcPeer, no schema checks, frames not parsed).
    const w = await connectChannelWire(url);
    const r = await w.request('session.create', { agent, options: {} }, 90_000);
    h = { kind, w, sessionId: r.session.id, lastSeq: r.session.last_seq, onItem: () => {} };
    w.onFrame = (f) => h.onItem(f);
    w.onClose = (info) => h.onClose?.(info);
    h.send = (obj) => void w.request('session.send', { session_id: h.sessionId, input_id: randomUUID(), line: obj }).catch(() => {});
    h.isFrame = (f) => f.includes(ASSISTANT_IN_ENVELOPE);
    h.close = () => w.close();
  } else if (kind === 'raw-ws' || kind === 'raw-read-ws') {
    // raw-read-ws: the raw relay in its reading mode (raw-relay.mjs --read or --duties): lines go as {"line":…}, frames come as {"seq":n,"line":…}, each parsed.
    const reading = kind === 'raw-read-ws';
    const ws = await openRawWs(url);
    h = { kind, ws, onItem: () => {} };
    ws.on('message', reading ? (data) => h.onItem(JSON.parse(data)) : (data) => h.onItem(data));
    h.send = reading ? (obj) => ws.send(JSON.stringify({ line: obj })) : (obj) => ws.send(JSON.stringify(obj));
    h.isFrame = reading ? (frame) => frame.line?.type === 'assistant' : isAssistantBuf;
    h.close = () => ws.terminate();
  } else if (kind === 'raw-grpc' || kind === 'raw-read-grpc') {
    // raw-read-grpc: as raw-read-ws, over the raw gRPC relay.
    const reading = kind === 'raw-read-grpc';
    const { call, close } = await openRawGrpc(url, 'client');
    h = { kind, call, onItem: () => {} };
    call.on('data', reading ? (b) => h.onItem(JSON.parse(b)) : (b) => h.onItem(b));
    h.send = reading
      ? (obj) => call.write(Buffer.from(JSON.stringify({ line: obj })))
      : (obj) => call.write(Buffer.from(JSON.stringify(obj)));
    h.isFrame = reading ? (frame) => frame.line?.type === 'assistant' : isAssistantBuf;
    h.close = close;
  } else if (kind === 'stdio') {
    h = await openStdio(ENGINE, []);
  } else if (kind === 'ssh') {
    h = await openStdio('ssh', ['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=3', '127.0.0.1', process.execPath, ENGINE]);
  } else throw new Error(`unknown kind ${kind}`);
  handles.set(id, h);
  return { sessionId: h.sessionId ?? h.session?.id, lastSeq: h.lastSeq ?? h.session?.info.last_seq };
}

function handle(id) {
  const h = handles.get(id);
  if (!h) throw new Error(`no handle ${id}`);
  return h;
}

/** Sequential round trips of one small user message; µs per round trip. */
async function latency({ id, iters = 500, warmup = 50, timeoutMs = 60_000 }) {
  const h = handle(id);
  const deadline = Date.now() + timeoutMs;
  const samples = [];
  for (let i = 0; i < warmup + iters && Date.now() < deadline; i++) {
    const got = new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no echo within 5 s')), 5_000);
      h.onItem = (x) => {
        if (h.isFrame(x)) {
          clearTimeout(t);
          resolve();
        }
      };
    });
    const t0 = nowUs();
    h.send(userLine(`ping ${i}`));
    await got;
    const dt = nowUs() - t0;
    if (i >= warmup) samples.push(dt);
  }
  h.onItem = () => {};
  return summarize(samples);
}

/** Engine → this client: `count` frames of `bytes` bytes as fast as they come. */
async function throughput({ id, count, bytes, timeoutMs = 60_000 }) {
  const h = handle(id);
  let n = 0;
  let t1 = 0;
  const done = new Promise((resolve, reject) => {
    const t = setTimeout(
      () =>
        reject(
          new Error(
            `throughput (${id}): ${n}/${count} frames within ${timeoutMs} ms${h.link ? `; link drops ${h.link.drops} (${h.link.last}), gaps ${h.gaps}` : ''}`,
          ),
        ),
      timeoutMs,
    );
    h.onItem = (x) => {
      if (!h.isFrame(x)) return;
      if (++n === count) {
        t1 = nowUs();
        clearTimeout(t);
        resolve();
      }
    };
    // A client that does not reconnect (the minimal one) fails at once when its link closes, saying why.
    const closedNow = (info) => {
      clearTimeout(t);
      reject(new Error(`throughput (${id}): ${n}/${count} frames, then the link closed: ${info.code} ${info.reason}`));
    };
    if (h.w?.closedInfo) closedNow(h.w.closedInfo);
    h.onClose = closedNow;
  });
  const t0 = nowUs();
  h.send(streamLine(count, bytes));
  await done.finally(() => {
    h.onClose = undefined;
  });
  h.onItem = () => {};
  const seconds = (t1 - t0) / 1e6;
  return { frames: n, seconds, fps: n / seconds, mbps: (n * bytes) / seconds / 1e6, linkDrops: h.link?.drops, gaps: h.gaps };
}

async function close({ id }) {
  const h = handles.get(id);
  handles.delete(id);
  await h?.close();
  return {};
}

// ---- fan-out ---------------------------------------------------------------------------

let viewers = [];
let slowViewer;
/** Viewers the relay closed on us (e.g. a missed ping), and why the last one was closed. */
let closedViewers = 0;
let lastClose = '';

/** Parses the number after `mark` in a frame buffer (engine lines, escaped or not). */
function numAfter(buf, mark, from = 0) {
  const i = buf.indexOf(mark, from);
  if (i < 0) return NaN;
  let j = i + mark.length;
  let s = '';
  for (; j < buf.length && j < i + mark.length + 24; j++) {
    const c = buf[j];
    if ((c >= 0x30 && c <= 0x39) || c === 0x2e) s += String.fromCharCode(c);
    else break;
  }
  return Number(s);
}

/** Every message any viewer received (frames, presence events…), to see when traffic settles. */
let viewerRx = 0;

function makeViewer() {
  const v = { count: 0, expected: 0, record: false, lat: [], onDone: undefined };
  v.onFrame = (buf) => {
    viewerRx++;
    const at = buf.indexOf('~i=');
    if (at < 0) return; // gateway events (presence, state), replies
    v.count++;
    if (v.record) v.lat.push(nowUs() - numAfter(buf, '~t=', at));
    if (v.count === v.expected) v.onDone?.();
  };
  return v;
}

async function openViewer(kind, url, sessionId, fromSeq) {
  const v = makeViewer();
  if (kind === 'ours') {
    const wire = await connectWire(url, { onFrame: (b) => v.onFrame(b) });
    await wire.request('session.attach', { session_id: sessionId, read_only: true, from_seq: fromSeq });
    v.close = () => wire.close();
    v.ws = wire.ws;
  } else {
    const ws = await openRawWs(url);
    ws.on('message', (b) => v.onFrame(b));
    v.close = () => ws.terminate();
    v.ws = ws;
  }
  const close = v.close;
  v.close = () => {
    v.closing = true;
    close();
  };
  v.ws.on('close', (code, reason) => {
    if (v.closing) return;
    closedViewers++;
    lastClose = `${code} ${reason}`;
  });
  return v;
}

/**
 * Opens n viewers on our gateway (attached read-only from `fromSeq`) or on the raw relay;
 * with `urls` (gateways of one cluster) viewer i goes to urls[i % urls.length].
 */
async function viewersOpen({ kind, url, urls = [url], sessionId, fromSeq, n, concurrency = 50 }) {
  viewers = [];
  closedViewers = 0;
  lastClose = '';
  let started = 0;
  const worker = async () => {
    while (started < n) {
      const at = urls[started++ % urls.length];
      viewers.push(await openViewer(kind, at, sessionId, fromSeq));
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return { open: viewers.length };
}

/**
 * Waits until no viewer has received anything for `quietMs` (bounded by `maxMs`): attaching
 * N viewers to one of our sessions sends N²/2 presence frames, which must drain before a
 * measurement starts.
 */
async function settle({ quietMs = 500, maxMs = 120_000 }) {
  const t0 = Date.now();
  let last = -1;
  while (Date.now() - t0 < maxMs) {
    if (viewerRx === last) break;
    last = viewerRx;
    await new Promise((r) => setTimeout(r, quietMs));
  }
  return { seconds: (Date.now() - t0) / 1000, settled: viewerRx === last, closedViewers };
}

/** Adds one viewer that never reads its socket: the relay's queue for it grows. Not counted. */
async function slowAdd({ kind, url, sessionId }) {
  slowViewer = await openViewer(kind, url, sessionId, undefined);
  slowViewer.ws.pause();
  return {};
}

/**
 * Starts a stream through the controller handle `ctrl` and waits until every viewer got
 * every frame (or the timeout). Returns deliveries/s over all viewers and latency
 * percentiles pooled over every frame of every viewer (when `record`).
 */
async function fanout({ ctrl, count, bytes = 200, rate, record = false, timeoutMs = 60_000 }) {
  const h = handle(ctrl);
  h.onItem = () => {};
  let doneViewers = 0;
  let t1 = 0;
  for (const v of viewers) {
    v.count = 0;
    v.lat = [];
    v.expected = count;
    v.record = record;
  }
  const all = new Promise((resolve) => {
    const t = setTimeout(resolve, timeoutMs);
    for (const v of viewers) {
      v.onDone = () => {
        if (++doneViewers === viewers.length) {
          t1 = nowUs();
          clearTimeout(t);
          resolve();
        }
      };
    }
  });
  const t0 = nowUs();
  h.send(streamLine(count, bytes, rate));
  await all;
  if (!t1) t1 = nowUs();
  const delivered = viewers.reduce((a, v) => a + v.count, 0);
  const complete = viewers.filter((v) => v.count === count).length;
  const out = {
    viewers: viewers.length,
    frames: count,
    delivered,
    complete,
    missing: viewers.length * count - delivered,
    seconds: (t1 - t0) / 1e6,
    deliveriesPerSec: delivered / ((t1 - t0) / 1e6),
    slowViewerGot: slowViewer ? slowViewer.count : undefined,
    closedViewers,
    lastClose,
    controllerDrops: h.link?.drops ?? 0,
    controllerLastDrop: h.link?.last,
  };
  if (record) {
    const pooled = [];
    for (const v of viewers) for (const x of v.lat) pooled.push(x);
    out.latency = summarize(pooled);
    const perViewerP99 = viewers.map((v) => summarize(v.lat).p99).sort((a, b) => a - b);
    out.worstViewerP99 = perViewerP99[perViewerP99.length - 1];
    for (const v of viewers) v.lat = [];
  }
  for (const v of viewers) v.onDone = undefined;
  return out;
}

async function viewersClose() {
  for (const v of viewers) v.close();
  slowViewer?.close();
  viewers = [];
  slowViewer = undefined;
  return {};
}

// ---- idle connections ------------------------------------------------------------------

let idle = [];

/** Opens n idle connections; ours attach (read-only) to the given sessions round robin. */
async function idleOpen({ kind, url, sessionIds = [], n, concurrency = 64 }) {
  let started = 0;
  const openOne = async (i) => {
    if (kind === 'ours-ws') {
      const wire = await connectWire(url);
      await wire.request('session.attach', { session_id: sessionIds[i % sessionIds.length], read_only: true });
      return () => wire.close();
    }
    if (kind === 'ours-grpc') {
      const channel = await dialGrpc(new URL(url), {});
      const peer = new RpcPeer(channel);
      void peer.run();
      await peer.request('hello', { protocol_version: PROTOCOL_VERSION, role: 'client', capabilities: [], software: 'tether-bench' });
      await peer.request('session.attach', { session_id: sessionIds[i % sessionIds.length], read_only: true });
      return () => channel.close('OK', 'bench done');
    }
    if (kind === 'raw-ws') {
      const ws = new WebSocket(`${url}/client`, { perMessageDeflate: false, handshakeTimeout: 10_000 });
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      ws.on('error', () => {});
      return () => ws.terminate();
    }
    if (kind === 'raw-grpc') {
      const { call, close } = await openRawGrpc(url, 'client');
      await new Promise((resolve) => call.once('metadata', resolve));
      return close;
    }
    throw new Error(`unknown idle kind ${kind}`);
  };
  const worker = async () => {
    while (started < n) {
      const i = started++;
      idle.push(await openOne(i));
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return { open: idle.length };
}

async function idleClose() {
  for (const c of idle) c();
  idle = [];
  return {};
}

/** Creates n sessions on `agent` through one connection, then closes it (sessions stay, idle). */
async function sessionsCreate({ url, agent, n, concurrency = 32, keepOpen = false }) {
  const wire = await connectWire(url);
  const ids = [];
  let started = 0;
  const worker = async () => {
    while (started < n) {
      started++;
      const r = await wire.request('session.create', { agent, options: {} }, 120_000);
      ids.push(r.session.id);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  if (!keepOpen) wire.close();
  else idle.push(() => wire.close());
  return { ids };
}

const { ready } = serve(
  {
    open,
    latency,
    throughput,
    close,
    viewersOpen,
    slowAdd,
    settle,
    fanout,
    viewersClose,
    idleOpen,
    idleClose,
    sessionsCreate,
    reconnectCuts,
    failoverArm,
    failoverWait,
    lateJoin,
    loadStep,
    loadClose,
  },
  {
    onExit: async () => {
      await viewersClose();
      await idleClose();
      await loadClose();
      await Promise.all([...handles.keys()].map((id) => close({ id })));
    },
  },
);
ready({});
