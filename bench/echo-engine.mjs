#!/usr/bin/env node
/**
 * Stand-in engine for the benchmarks: speaks the Claude Code CLI's stream-json protocol on
 * stdio, with no thinking time of its own.
 *
 *  - `control_request` / `initialize` → a success `control_response` (the agent's handshake).
 *  - a `user` message → one `assistant` frame echoing its content (round-trip latency).
 *  - `control_request` / `bench_stream` {count, bytes, rate?} (answered with a success
 *    `control_response` first; the raw relays' clients), or the same asked as a prompt (below)
 *    → `count` assistant frames of exactly `bytes` bytes each (newline not counted), as
 *    fast as stdout takes them or at `rate` frames/s. Every frame carries `~i=<index>~` and
 *    `~t=<µs>~` (process.hrtime, a clock every process on the machine shares) inside its text,
 *    so readers can find them without parsing, escaped in an envelope or not.
 *  - `control_request` / `bench_mix` {count} → like bench_stream, but the sizes of a real
 *    session (mixSize below): mostly small deltas, every 25th frame a 5–50 KB tool result.
 *  - a `user` message whose text is `bench_stream {…}` or `bench_mix {…}` (the fields as
 *    JSON) → the same stream, no echo: the way in for clients of the gateway, which passes
 *    only the engine's own control subtypes (core/engine-controls.ts).
 *  - any other control_request → a success control_response; anything else is ignored.
 *
 * Exits at stdin EOF. Bounded: a stream is at most 10,000,000 frames and 120 s.
 */
const MAX_COUNT = 10_000_000;
const MAX_STREAM_MS = 120_000;

const nowUs = () => Number(process.hrtime.bigint()) / 1000;
const out = process.stdout;
let streaming = false;

function write(text) {
  return out.write(text) ? null : new Promise((r) => out.once('drain', r));
}

function reply(requestId, response = {}) {
  return write(JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: requestId, response } }) + '\n');
}

const HEAD = '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"';
const TAIL = '"}]},"session_id":"bench"}';
const PAD = 'x'.repeat(1024 * 1024);

/** One frame of exactly `bytes` bytes (at least its fixed part). */
function frame(i, bytes) {
  const marks = `~i=${i}~t=${nowUs().toFixed(1)}~`;
  const pad = Math.max(0, bytes - HEAD.length - TAIL.length - marks.length);
  let text = marks;
  if (pad <= PAD.length) text += PAD.slice(0, pad);
  else text += PAD.repeat(Math.floor(pad / PAD.length)) + PAD.slice(0, pad % PAD.length);
  return HEAD + text + TAIL + '\n';
}

/**
 * Frame i's size in a realistic session: 24 of 25 frames are deltas of 100–400 bytes, the
 * 25th a tool result of 5–50 KB (deterministic, so every run replays the same bytes).
 */
const mixSize = (i) => (i % 25 === 24 ? 5_000 + ((i * 7_919) % 45_001) : 100 + ((i * 37) % 301));

async function stream({ count, bytes, rate, sizeOf }) {
  count = Math.min(Math.max(0, Number(count) || 0), MAX_COUNT);
  bytes = Math.max(0, Number(bytes) || 200);
  rate = Number(rate) || 0;
  const deadline = Date.now() + MAX_STREAM_MS;
  streaming = true;
  try {
    if (rate > 0) {
      const start = Date.now();
      for (let i = 0; i < count && Date.now() < deadline; i++) {
        const due = start + (i * 1000) / rate;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const p = write(frame(i, sizeOf ? sizeOf(i) : bytes));
        if (p) await p;
      }
      return;
    }
    // As fast as the pipe takes them, a few frames per write (up to 64 KiB) to keep the
    // engine's own cost out of the way.
    let batch = '';
    for (let i = 0; i < count; i++) {
      batch += frame(i, sizeOf ? sizeOf(i) : bytes);
      if (batch.length >= 65536 || i === count - 1) {
        const p = write(batch);
        batch = '';
        if (p) await p;
        if (Date.now() > deadline) break;
      }
    }
  } finally {
    streaming = false;
  }
}

let queue = Promise.resolve();
function handle(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.type === 'user') {
    const content = msg.message?.content;
    const text = typeof content === 'string' ? content : JSON.stringify(content);
    const asked = /^bench_(stream|mix) (\{.*\})$/.exec(text);
    if (asked) {
      const req = JSON.parse(asked[2]);
      queue = queue.then(() => stream({ ...req, sizeOf: asked[1] === 'mix' ? mixSize : undefined }));
      return;
    }
    const echo = { type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text }] }, session_id: 'bench' };
    queue = queue.then(() => write(JSON.stringify(echo) + '\n'));
    return;
  }
  if (msg.type === 'control_request') {
    const req = msg.request ?? {};
    if (req.subtype === 'bench_stream' || req.subtype === 'bench_mix') {
      const sizeOf = req.subtype === 'bench_mix' ? mixSize : undefined;
      queue = queue.then(() => reply(msg.request_id, { streaming: true })).then(() => stream({ ...req, sizeOf }));
      return;
    }
    const response = req.subtype === 'initialize' ? { commands: [], models: [], account: {}, claude_code_version: 'bench-echo' } : {};
    queue = queue.then(() => reply(msg.request_id, response));
  }
}

let buf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buf += chunk;
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (line.trim()) handle(line);
  }
});
process.stdin.on('end', () => {
  void queue.finally(() => process.exit(0));
});
out.on('error', () => process.exit(0));
void streaming;
