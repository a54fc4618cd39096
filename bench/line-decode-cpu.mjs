#!/usr/bin/env node
/**
 * CPU per engine line of the agent's read path in isolation: the LineSplitter fed figure 2's
 * 100 KB assistant lines in 64 KiB pipe chunks (as stdout delivers them), then lineMeta, the
 * last 50 lines' bytes kept (as the relay's outbox holds them until acked). No sockets, so a
 * change to splitting or decoding shows through a loaded machine.
 *
 *   node bench/line-decode-cpu.mjs [--dist dist] [--bytes 100000] [--rounds 7]
 *
 * --dist: the build to load (e.g. a copy of main's dist/ for an A/B). Prints the median CPU µs
 * per line over the rounds, and each round's.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { argsOf } from './lib/child.mjs';
import { helpAndExit } from './lib/usage.mjs';

helpAndExit(import.meta.url);

const a = argsOf();
const dist = pathToFileURL(resolve(a.dist ?? 'dist')).href;
const BYTES = Number(a.bytes ?? 100_000);
const ROUNDS = Number(a.rounds ?? 7);
const { LineSplitter } = await import(`${dist}/agent/line-splitter.js`);
const { lineMeta } = await import(`${dist}/agent/line-meta.js`);

// The shape of bench/echo-engine.mjs's frames.
const HEAD = '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"';
const TAIL = '"}]},"session_id":"bench"}';
const marks = '~i=1~t=123.4~';
const line = `${HEAD}${marks}${'x'.repeat(Math.max(0, BYTES - HEAD.length - TAIL.length - marks.length))}${TAIL}\n`;
const stream = Buffer.from(line.repeat(20));
const chunks = [];
for (let i = 0; i < stream.length; i += 65_536) chunks.push(Buffer.from(stream.subarray(i, i + 65_536)));

const splitter = new LineSplitter();
const kept = [];
let lines = 0;
function pass() {
  for (const chunk of chunks) {
    for (const item of splitter.push(chunk)) {
      if (item.kind !== 'frame') throw new Error(`not a frame: ${item.code}`);
      lineMeta(item.value);
      kept.push(item.bytes);
      if (kept.length > 50) kept.shift();
      lines++;
    }
  }
}

for (let i = 0; i < 200; i++) pass(); // warm-up
const perLine = [];
for (let r = 0; r < ROUNDS; r++) {
  lines = 0;
  const t0 = process.cpuUsage();
  for (let i = 0; i < 300; i++) pass();
  const d = process.cpuUsage(t0);
  perLine.push((d.user + d.system) / lines);
}
const sorted = [...perLine].sort((x, y) => x - y);
console.log(
  `${a.dist ?? 'dist'}: ${BYTES} B lines, CPU µs per line median ${sorted[Math.floor(sorted.length / 2)].toFixed(1)} (rounds: ${perLine.map((x) => x.toFixed(1)).join(' ')})`,
);
