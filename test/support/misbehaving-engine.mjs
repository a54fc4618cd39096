#!/usr/bin/env node
// A stand-in for the Claude Code CLI that misbehaves on purpose (threats.md 2G). Behaviour is
// chosen with `--mode <name>` (or $MISBEHAVE_MODE, for an agent that passes the CLI's flags); see MODES below. stdout is written with fs.writeSync so the
// process really blocks when the reader stops reading (fd 1 stays a blocking descriptor because
// process.stdout is never touched).
import { spawn } from 'node:child_process';
import { closeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { writeAll } from './write-all.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
};
const mode = opt('mode', process.env.MISBEHAVE_MODE ?? 'echo');

const out = (data) => writeAll(1, typeof data === 'string' ? Buffer.from(data) : data);
const err = (data) => writeAll(2, Buffer.from(data));
const frame = (obj) => out(`${JSON.stringify(obj)}\n`);

/** Calls `fn` on stdin EOF (keeps reading and ignoring stdin until then). */
function onStdinEnd(fn) {
  process.stdin.on('data', () => {});
  process.stdin.on('end', fn);
}

const MODES = {
  // Echoes every stdin line as {"type":"echo","got":<parsed>}; exits 0 on stdin EOF.
  echo() {
    const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
    rl.on('line', (line) => frame({ type: 'echo', got: JSON.parse(line) }));
    rl.on('close', () => process.exit(0));
  },

  // Like echo, and each echo also carries the environment's CLAUDE_* and TRACE* variables.
  'echo-env'() {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => /^(CLAUDE_|TRACE)/.test(k)));
    const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
    rl.on('line', (line) => frame({ type: 'echo', got: JSON.parse(line), env }));
    rl.on('close', () => process.exit(0));
  },

  // Writes to stderr, then exits 3.
  crash() {
    err('fatal: engine exploded on purpose\n');
    process.exit(3);
  },

  // Non-JSON, non-object JSON, blank lines, invalid UTF-8, then good frames; exits 0 on EOF.
  garbage() {
    out('hello world\n');
    out('{"unterminated": \n');
    out('[1,2,3]\n');
    out('"just a string"\n');
    out('42\n');
    out('null\n');
    out('\n');
    out('   \r\n');
    out(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d, 0x0a])); // {"a":"\xff\xfe"}
    out(Buffer.from([0xed, 0xa0, 0x80, 0x0a])); // an encoded lone surrogate (invalid UTF-8)
    out(`\u001b[31mred\u202e${'x'.repeat(500)}\n`); // escapes and a long line: preview must be bounded
    out('{"type":"crlf","n":1}\r\n');
    frame({ type: 'after_garbage', text: 'héllo ✓ 😀' });
    onStdinEnd(() => process.exit(0));
  },

  // One valid JSON line of --size bytes (default 10 MB), then {"type":"after_huge"}; exits 0 on EOF.
  'huge-line'() {
    const size = Number(opt('size', String(10_000_000)));
    const head = '{"type":"huge","pad":"';
    const tail = '"}';
    const pad = Math.max(0, size - head.length - tail.length);
    out(Buffer.concat([Buffer.from(head), Buffer.alloc(pad, 0x61), Buffer.from(`${tail}\n`)]));
    frame({ type: 'after_huge' });
    onStdinEnd(() => process.exit(0));
  },

  // A line that never ends: 64 KiB of 'x' after '{"type":"endless","pad":"', forever.
  'endless-line'() {
    out('{"type":"endless","pad":"');
    const chunk = Buffer.alloc(64 * 1024, 0x78);
    for (;;) out(chunk);
  },

  // Traps SIGTERM (logs and keeps running); ignores stdin EOF.
  'ignore-sigterm'() {
    process.on('SIGTERM', () => err('ignoring SIGTERM\n'));
    process.stdin.on('data', () => {});
    process.stdin.on('end', () => err('stdin closed, staying alive\n'));
    setInterval(() => {}, 1000);
    frame({ type: 'ready' });
  },

  // Speaks just enough stream-json to start a session (answers initialize, and each user
  // message with a one-line assistant turn and a result) but never answers any other
  // control_request (interrupt, set_model, ...); ignores stdin EOF and SIGTERM, so only
  // SIGKILL ends it.
  'deaf-to-control'() {
    process.on('SIGTERM', () => err('ignoring SIGTERM\n'));
    const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
    rl.on('line', (line) => {
      const m = JSON.parse(line);
      if (m.type === 'control_request' && m.request?.subtype === 'initialize') {
        frame({ type: 'control_response', response: { subtype: 'success', request_id: m.request_id, response: {} } });
      } else if (m.type === 'user') {
        frame({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: 'ok' }] } });
        frame({ type: 'result', subtype: 'success', is_error: false, result: 'ok' });
      }
    });
    rl.on('close', () => err('stdin closed, staying alive\n'));
    setInterval(() => {}, 1000);
  },

  // Spawns `sleep 300` in our process group (detached: false), sharing our stdout and stderr
  // pipes, and reports its pid; exits 0 on stdin EOF, leaving the sleep behind. With `--escape`
  // the sleep gets its own session (detached: true), out of reach of a group kill.
  grandchild() {
    const detached = argv.includes('--escape');
    const child = spawn('sleep', ['300'], { detached, stdio: ['ignore', 'inherit', 'inherit'] });
    child.unref();
    frame({ type: 'grandchild', pid: child.pid });
    onStdinEnd(() => process.exit(0));
  },

  // Writes {"type":"final"} 1 s after stdin EOF, then exits 0.
  'slow-exit'() {
    frame({ type: 'ready' });
    onStdinEnd(() => {
      setTimeout(() => {
        frame({ type: 'final' });
        process.exit(0);
      }, 1000);
    });
  },

  // Writes --size bytes (default 64 MB) of numbered stderr lines between two stdout frames,
  // then a last stderr marker; exits 0.
  'stderr-flood'() {
    const size = Number(opt('size', String(64_000_000)));
    frame({ type: 'started' });
    const block = Buffer.from(Array.from({ length: 1000 }, (_, i) => `stderr flood line ${i}\n`).join(''));
    for (let sent = 0; sent < size; sent += block.length) err(block);
    frame({ type: 'done' });
    err('END-OF-STDERR-MARKER\n');
    process.exit(0);
  },

  // Writes --size bytes (default 100 MB) of ~1 KiB numbered frames, reporting progress on stderr
  // every 256 KiB, then {"type":"flood_end"}; exits 0.
  flood() {
    const size = Number(opt('size', String(100_000_000)));
    const pad = 'p'.repeat(1000);
    let i = 0;
    let reported = 0;
    for (let sent = 0; sent < size; i++) {
      const line = `{"type":"flood","i":${i},"pad":"${pad}"}\n`;
      out(line);
      sent += line.length;
      if (sent - reported >= 256 * 1024) {
        err(`progress ${sent}\n`); // bytes fully written to stdout so far
        reported = sent;
      }
    }
    frame({ type: 'flood_end', count: i });
    process.exit(0);
  },

  // Closes its stdin right away (so writes to it fail with EPIPE) and stays alive until SIGTERM.
  'no-stdin'() {
    closeSync(0);
    setInterval(() => {}, 1000);
    frame({ type: 'ready' });
  },

  // Never reads stdin (so our writes back up); stays alive until SIGTERM.
  'no-read'() {
    setInterval(() => {}, 1000);
    frame({ type: 'ready' });
  },
};

// The agent's `--version` probe at start is answered as the CLI answers it: the modes that
// ignore stdin EOF would otherwise hold every agent start for the probe's 10-s bound.
if (argv.at(-1) === '--version') {
  out('0.0.0 (misbehaving stand-in)\n');
  process.exit(0);
}

const run = MODES[mode];
if (!run) {
  err(`unknown mode ${mode}\n`);
  process.exit(2);
}
run();
