#!/usr/bin/env node
// A recorded engine: stands in for the Claude Code CLI by playing back one real transcript
// from test/fixtures/engine (format: that folder's README). It accepts and ignores the
// CLI flags. For every `in` entry it waits for the next host line on stdin and checks that it
// matches (type, subtype and content equal, key order aside; ids and timestamps free, with
// the host's request ids kept consistent); then it writes the `out` entries that followed, in
// order, rewriting the request_id of its control_responses to the id the host actually used.
// `note` entries are host actions it waits for (stdin EOF, SIGTERM, SIGINT); `exit` ends the
// process the recorded way, after writing the recorded stderr tail (NAME.meta.json).
//
// `--version` prints the recorded CLI's version line and exits, as the CLI does.
//
// Environment:
//   TETHER_RECORDED_TRANSCRIPT  absolute path of the .ndjson transcript (required)
//   TETHER_RECORDED_LOG         file that gets every host line received, verbatim, one per line
//   TETHER_RECORDED_TRACE       file that gets a JSON line per event: {ev:'start',pid,argv},
//                               {ev:'out',line} (each stdout line as written), {ev:'eof'},
//                               {ev:'signal',signal}, {ev:'mismatch',message}, {ev:'exit',code,signal}
//   TETHER_RECORDED_PRELUDE     path of a transcript whose opening initialize exchange is played
//                               BEFORE this one: the host (Tether's agent) initializes on its
//                               own although this transcript does not open with that frame
//   TETHER_RECORDED_SKIP        comma-separated line indices of `in` entries that never reach
//                               the engine (a relay refused or absorbed them); the `out`
//                               entries right after a skipped one (the engine's reaction to
//                               it) are skipped as well
//   TETHER_RECORDED_UNTIL       line index: replay stops before that entry; the engine then
//                               waits for stdin EOF and exits 0 (an idle CLI's exit)
//   TETHER_RECORDED_ENV_FILE    path (relative to the engine's working folder) of a JSON object
//                               of the variables above, read at start: one agent then serves
//                               many replays, each session in a folder of its own. Absent file:
//                               the variables come from the environment alone.
//
// A host line that does not match (or stdin ending while a frame is expected, or a host
// frame the transcript does not have) is a mismatch: a description goes to stderr and the
// trace, and the process exits 70.
//
// Start-up refusals: when the transcript's host initialize never got an answer before the
// host closed stdin, the CLI refused to start and exited on its own (64, 65, 82c, 83); the
// recorded engine then does not wait for EOF either.
import { appendFileSync, existsSync, readFileSync, writeSync } from 'node:fs';
import { writeAll } from './write-all.mjs';

const MISMATCH_EXIT = 70;
/** Keys whose values differ on every run: compared for presence of the frame, not value. */
const FREE_KEYS = new Set(['request_id', 'uuid', 'session_id', 'timestamp', 'toolUseID', 'tool_use_id']);
const NO_ID = '\u0000no request_id';

const env = process.env;
if (env.TETHER_RECORDED_ENV_FILE && existsSync(env.TETHER_RECORDED_ENV_FILE))
  Object.assign(env, JSON.parse(readFileSync(env.TETHER_RECORDED_ENV_FILE, 'utf8')));
const transcriptPath = env.TETHER_RECORDED_TRANSCRIPT;

// `--version` alone: answer as the CLI that recorded the transcript would (its version is in
// the transcript's initialize answer), touching neither the log nor the trace.
if (process.argv.length === 3 && (process.argv[2] === '--version' || process.argv[2] === '-v')) {
  const recorded =
    transcriptPath && existsSync(transcriptPath)
      ? /"claude_code_version":"([^"]+)"/.exec(readFileSync(transcriptPath, 'utf8'))?.[1]
      : undefined;
  writeSync(1, `${recorded ?? '2.1.332'} (Claude Code)\n`);
  process.exit(0);
}
const logPath = env.TETHER_RECORDED_LOG;
const tracePath = env.TETHER_RECORDED_TRACE;

function trace(ev) {
  if (tracePath) appendFileSync(tracePath, `${JSON.stringify(ev)}\n`);
}

function fail(message) {
  trace({ ev: 'mismatch', message });
  writeAll(2, Buffer.from(`recorded-engine: MISMATCH in ${transcriptPath ?? '(no transcript)'}: ${message}\n`));
  trace({ ev: 'exit', code: MISMATCH_EXIT, signal: null });
  process.exit(MISMATCH_EXIT);
}

if (!transcriptPath) fail('TETHER_RECORDED_TRANSCRIPT is not set');
trace({ ev: 'start', pid: process.pid, argv: process.argv.slice(2) });

function readTranscript(path) {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l, index) => ({ ...JSON.parse(l), index }));
}

const indexList = (v) => new Set((v ?? '').split(',').filter(Boolean).map(Number));

let entries = readTranscript(transcriptPath);
const skip = indexList(env.TETHER_RECORDED_SKIP);
const until = env.TETHER_RECORDED_UNTIL !== undefined && env.TETHER_RECORDED_UNTIL !== '' ? Number(env.TETHER_RECORDED_UNTIL) : undefined;
if (until !== undefined) entries = entries.filter((e) => e.index < until);

if (env.TETHER_RECORDED_PRELUDE) {
  const pre = readTranscript(env.TETHER_RECORDED_PRELUDE);
  const init = pre.find((e) => e.dir === 'in');
  if (init.frame?.type !== 'control_request' || init.frame.request?.subtype !== 'initialize')
    fail('prelude transcript does not open with an initialize');
  const answer = pre.find(
    (e) => e.dir === 'out' && e.frame?.type === 'control_response' && e.frame.response?.request_id === init.frame.request_id,
  );
  if (!answer) fail('prelude transcript has no answer to its initialize');
  entries = [{ ...init, index: -2, prelude: true }, { ...answer, index: -1, prelude: true }, ...entries];
}

let meta = {};
const metaPath = transcriptPath.replace(/\.ndjson$/, '.meta.json');
if (existsSync(metaPath)) meta = JSON.parse(readFileSync(metaPath, 'utf8'));

// ---- stdin: lines kept verbatim, in order ------------------------------------------------

const hostLines = [];
let stdinEnded = false;
let wake = () => {};
let pending = Buffer.alloc(0);

process.stdin.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  for (;;) {
    const nl = pending.indexOf(0x0a);
    if (nl < 0) break;
    const line = pending.subarray(0, nl).toString('utf8');
    pending = pending.subarray(nl + 1);
    if (logPath) appendFileSync(logPath, `${line}\n`);
    hostLines.push(line);
  }
  wake();
});
process.stdin.on('end', () => {
  if (pending.length) {
    const line = pending.toString('utf8');
    if (logPath) appendFileSync(logPath, `${line}\n`);
    hostLines.push(line);
    pending = Buffer.alloc(0);
  }
  stdinEnded = true;
  trace({ ev: 'eof' });
  wake();
});
process.stdin.on('error', () => {
  stdinEnded = true;
  wake();
});

// ---- signals the transcript shows the host sending -----------------------------------------

const signalsSeen = new Set();
const SIGNAL_NOTES = { 'host sent SIGTERM': 'SIGTERM', 'host sent SIGINT': 'SIGINT' };
for (const e of entries) {
  const sig = e.dir === 'note' ? SIGNAL_NOTES[e.note] : undefined;
  if (sig && process.listenerCount(sig) === 0) {
    process.on(sig, () => {
      signalsSeen.add(sig);
      trace({ ev: 'signal', signal: sig });
      wake();
    });
  }
}

function waitFor(cond) {
  return new Promise((resolve) => {
    const check = () => {
      if (cond()) {
        wake = () => {};
        resolve();
      } else {
        wake = check;
      }
    };
    check();
  });
}

// ---- matching ----------------------------------------------------------------------------

/** Canonical JSON with sorted keys and free keys dropped (ids and timestamps may differ). */
function canon(v, free) {
  if (Array.isArray(v)) return `[${v.map((x) => canon(x, free)).join(',')}]`;
  if (v && typeof v === 'object') {
    const keys = Object.keys(v)
      .filter((k) => !(free && FREE_KEYS.has(k)))
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canon(v[k], free)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * A recorded host frame as Tether hands it to the engine (docs/protocol.md): a user frame
 * stamped with an origin when it named none (and a uuid, a free key); an answer's session
 * allow rules kept at the gateway, not passed on (docs/policy.md, per-person rules).
 */
function asTetherSends(frame) {
  if (frame?.type === 'user' && frame.origin === undefined) return { ...frame, origin: { kind: 'human' } };
  const answer = frame?.type === 'control_response' ? frame.response?.response : undefined;
  if (!Array.isArray(answer?.updatedPermissions)) return frame;
  const sessionAllow = (u) => u?.type === 'addRules' && u.behavior === 'allow' && u.destination === 'session';
  return {
    ...frame,
    response: { ...frame.response, response: { ...answer, updatedPermissions: answer.updatedPermissions.filter((u) => !sessionAllow(u)) } },
  };
}

function describe(frame) {
  if (!frame || typeof frame !== 'object') return JSON.stringify(frame);
  const sub = frame.request?.subtype ?? frame.response?.subtype ?? frame.subtype;
  return `${frame.type}${sub ? `/${sub}` : ''}`;
}

function preview(s, n = 400) {
  return s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s;
}

/** Recorded host request id → the id the host actually used (undefined = none). */
const hostIds = new Map();
/** Request ids of the control_requests this engine wrote (the host must answer with them). */
const engineIds = new Set();
/** The recorded request_id of a host initialize not answered yet. */
let pendingInit;

function matchIn(entry, line) {
  const where = `transcript line ${entry.index < 0 ? `(prelude ${entry.index + 3})` : entry.index + 1}`;
  if (entry.raw !== undefined) {
    if (line !== entry.raw) fail(`${where}: expected the raw line ${JSON.stringify(entry.raw)}, got ${preview(line)}`);
    return;
  }
  let actual;
  try {
    actual = JSON.parse(line);
  } catch {
    fail(`${where}: expected ${describe(entry.frame)}, got a line that is not JSON: ${preview(line)}`);
  }
  const expected = asTetherSends(entry.frame);
  if (canon(actual, true) !== canon(expected, true)) {
    fail(
      `${where}: host frame differs.\n  expected (${describe(expected)}): ${preview(JSON.stringify(expected), 2000)}\n  actual   (${describe(actual)}): ${preview(line, 2000)}`,
    );
  }
  // Correlation ids: consistent host ids, exact answers to the engine's own requests.
  if (expected.type === 'control_request' || expected.type === 'control_cancel_request') {
    const key = expected.request_id ?? NO_ID;
    const got = actual.request_id;
    if (expected.type === 'control_cancel_request' && hostIds.has(key) && hostIds.get(key) !== got) {
      fail(
        `${where}: control_cancel_request names ${JSON.stringify(got)} but the request it cancels was sent as ${JSON.stringify(hostIds.get(key))}`,
      );
    }
    for (const [k, v] of hostIds) {
      if (k !== key && v !== undefined && v === got && expected.type === 'control_request') {
        fail(`${where}: host reused request_id ${JSON.stringify(got)} (already used for recorded ${JSON.stringify(k)})`);
      }
    }
    hostIds.set(key, got);
    if (expected.type === 'control_request' && expected.request?.subtype === 'initialize') pendingInit = key;
  }
  if (expected.type === 'control_response') {
    const want = expected.response?.request_id;
    const got = actual.response?.request_id;
    if (engineIds.has(want) && got !== want)
      fail(`${where}: the host answered ${JSON.stringify(got)} instead of the engine's request ${JSON.stringify(want)}`);
  }
}

/** The recorded out frame with the host's actual ids put back where the CLI echoes them. */
function rewriteOut(frame) {
  const out = structuredClone(frame);
  if (out.type === 'control_request' && typeof out.request_id === 'string') engineIds.add(out.request_id);
  if (out.type === 'control_response' && out.response && typeof out.response === 'object') {
    const r = out.response;
    const key = r.request_id ?? NO_ID;
    if (key === pendingInit) pendingInit = undefined;
    if (hostIds.has(key)) {
      const actual = hostIds.get(key);
      const { subtype, request_id: _drop, ...rest } = r;
      // The CLI writes subtype, request_id, then the payload: keep that order.
      out.response = actual === undefined ? { subtype, ...rest } : { subtype, request_id: actual, ...rest };
      if (subtype === undefined) delete out.response.subtype;
    }
  }
  return out;
}

function writeOut(frame) {
  const line = JSON.stringify(rewriteOut(frame));
  writeAll(1, Buffer.from(`${line}\n`));
  trace({ ev: 'out', line });
}

async function nextHostLine(entry) {
  await waitFor(() => hostLines.length > 0 || stdinEnded);
  if (hostLines.length === 0)
    fail(`stdin ended while the transcript expects ${describe(entry.frame ?? entry.raw)} (line ${entry.index + 1})`);
  return hostLines.shift();
}

function finish(exitEntry) {
  if (hostLines.length) fail(`host frames the transcript does not have: ${hostLines.map((l) => preview(l, 200)).join(' | ')}`);
  const tail = typeof meta.stderr_tail === 'string' && until === undefined ? meta.stderr_tail : '';
  if (tail) writeAll(2, Buffer.from(tail.endsWith('\n') ? tail : `${tail}\n`));
  const code = exitEntry?.code ?? 0;
  const signal = exitEntry?.signal ?? null;
  trace({ ev: 'exit', code: signal ? null : code, signal });
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    setTimeout(() => process.exit(128), 1000);
    return;
  }
  process.exit(code);
}

// ---- replay ------------------------------------------------------------------------------

// Waiting for a signal after stdin ended leaves nothing else to keep the event loop alive.
setInterval(() => {}, 1 << 30);

async function main() {
  let reacting = false; // inside the outs that answer a skipped in
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    if (e.dir === 'in') {
      if (skip.has(e.index)) {
        reacting = true;
        continue;
      }
      reacting = false;
      matchIn(e, await nextHostLine(e));
      continue;
    }
    if (e.dir === 'out') {
      if (!reacting) writeOut(e.frame);
      continue;
    }
    reacting = false;
    if (e.dir === 'note') {
      // Consecutive notes are one group of host actions; the order inside it is free (a relay
      // may close stdin before it signals, as Tether's staged stop does).
      const group = [e];
      while (entries[i + 1]?.dir === 'note') group.push(entries[++i]);
      for (const n of group) {
        if (n.note === 'host closed stdin (EOF)') {
          if (pendingInit !== undefined) {
            trace({ ev: 'note', note: 'start-up refusal: initialize unanswered, exiting without waiting for EOF' });
            continue;
          }
          await waitFor(() => stdinEnded || hostLines.length > 0);
          if (hostLines.length) fail(`expected stdin EOF, got host frames: ${hostLines.map((l) => preview(l, 200)).join(' | ')}`);
        } else if (SIGNAL_NOTES[n.note]) {
          const sig = SIGNAL_NOTES[n.note];
          await waitFor(() => signalsSeen.has(sig));
        }
        // Other notes ("stdin write failed: …") describe what the host saw; nothing to do.
      }
      continue;
    }
    if (e.dir === 'exit') return finish(e);
  }
  // Replay cut short (TETHER_RECORDED_UNTIL) or a transcript without exit: an idle CLI exits 0 on EOF.
  await waitFor(() => stdinEnded || hostLines.length > 0);
  if (hostLines.length) fail(`host frames after the end of the replay: ${hostLines.map((l) => preview(l, 200)).join(' | ')}`);
  finish(undefined);
}

main().catch((err) => fail(`internal error: ${err?.stack ?? err}`));
