/**
 * The baselines' agent: dials the raw relay (it dials out, like ours, so over ws it masks
 * what it sends), spawns one engine, does the engine's initialize handshake, then pipes
 * engine stdout lines to the relay and relay messages (plus a newline) to engine stdin.
 * Reading the engine pauses while the outgoing buffer is over 8 MiB.
 *
 *   --transport ws|grpc --url <relay> [--engine <path>] [--read] [--duties]
 *
 * --read (with raw-relay.mjs --read): each relay message is parsed and its `line` written
 * serialized; each engine line is checked as JSON (the agent's check of threats G1/G2) and sent
 * as `{"line":…}` (the line's own text inside).
 *
 * --duties (implies --read; with raw-relay.mjs --duties): each line is also checked again
 * before it is written, by the agent's own engine input check (core/protocol/engine-input.ts,
 * from dist/), which serializes it.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import { argsOf, serve } from '../lib/child.mjs';
import { openRawGrpc } from '../lib/raw-grpc.mjs';

const a = argsOf();
const HWM = 8 * 1024 * 1024;
const duties = a.duties === true;
const read = a.read === true || duties;
/** --duties only: our engine input check (the raw modes load no code of ours). */
const { checkEngineInput } = duties ? await import('../../dist/core/protocol/engine-input.js') : {};
const enginePath = a.engine ?? fileURLToPath(new URL('../echo-engine.mjs', import.meta.url));
const engine = spawn(enginePath, [], { stdio: ['pipe', 'pipe', 'inherit'] });
engine.stdin.on('error', () => {});
process.on('exit', () => engine.kill('SIGKILL'));

/** A relay message to the engine's stdin: as it is, or (--read) its `line` serialized, checked again with --duties. */
function fromRelay(data) {
  if (!read) {
    engine.stdin.write(data);
    engine.stdin.write('\n');
    return;
  }
  const { line } = JSON.parse(data);
  if (!duties) return engine.stdin.write(`${JSON.stringify(line)}\n`);
  let text;
  try {
    text = checkEngineInput(line); // the agent's own check before it writes
  } catch {
    return;
  }
  engine.stdin.write(`${text}\n`);
}

/** --read: an engine line checked as JSON (a line that is not would be an engine_error) and wrapped as `{"line":…}`; undefined: dropped. */
function toRelay(line) {
  const text = line.toString('utf8');
  try {
    JSON.parse(text);
  } catch {
    return undefined;
  }
  return `{"line":${text}}`;
}

// Link to the relay.
let send;
let paused = false;
const resumeIfLow = (buffered) => {
  if (paused && buffered < HWM / 2) {
    paused = false;
    engine.stdout.resume();
  }
};
if ((a.transport ?? 'ws') === 'ws') {
  const ws = new WebSocket(`${a.url}/agent`, { perMessageDeflate: false, maxPayload: 64 * 1024 * 1024, handshakeTimeout: 10_000 });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  ws.on('error', () => {});
  ws.on('message', fromRelay);
  send = (line) => {
    if (read) line = toRelay(line);
    if (line === undefined) return;
    ws.send(line, { binary: false }, () => resumeIfLow(ws.bufferedAmount));
    if (!paused && ws.bufferedAmount > HWM) {
      paused = true;
      engine.stdout.pause();
    }
  };
} else {
  const { call } = await openRawGrpc(a.url, 'agent');
  call.on('data', fromRelay);
  call.on('drain', () => {
    paused = false;
    engine.stdout.resume();
  });
  send = (line) => {
    if (read) line = toRelay(line);
    if (line === undefined) return;
    if (!call.write(read ? Buffer.from(line) : line) && !paused) {
      paused = true;
      engine.stdout.pause();
    }
  };
}

// Engine stdout, split into lines.
let initDone;
const initialized = new Promise((r) => (initDone = r));
let carry = null;
engine.stdout.on('data', (chunk) => {
  const buf = carry ? Buffer.concat([carry, chunk]) : chunk;
  let start = 0;
  let nl;
  while ((nl = buf.indexOf(10, start)) >= 0) {
    const line = buf.subarray(start, nl);
    start = nl + 1;
    if (initDone && line.includes('tether_agent_init')) {
      initDone();
      initDone = undefined;
      continue;
    }
    send(line);
  }
  carry = start < buf.length ? buf.subarray(start) : null;
});
engine.stdin.write(
  JSON.stringify({ type: 'control_request', request_id: 'tether_agent_init', request: { subtype: 'initialize', hooks: null } }) + '\n',
);
await initialized;

const { ready } = serve({}, { onExit: () => engine.kill('SIGKILL') });
ready({ enginePid: engine.pid });
