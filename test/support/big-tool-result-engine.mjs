#!/usr/bin/env node
// A stand-in engine for slow links: answers initialize, then for each user message runs one
// "tool" whose result is TETHER_TOOL_RESULT_BYTES bytes (default 1 MiB): an assistant tool_use
// line, a user tool_result line of that size, a short assistant text and a result.
import { createInterface } from 'node:readline';
import { writeSync } from 'node:fs';

const size = Number(process.env.TETHER_TOOL_RESULT_BYTES ?? 1024 * 1024);
const session_id = 'big-tool';
const write = (obj) => {
  const buf = Buffer.from(JSON.stringify(obj) + '\n');
  for (let off = 0; off < buf.length; ) off += writeSync(1, buf, off);
};
let turn = 0;

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  const f = JSON.parse(line);
  if (f.type === 'control_request') write({ type: 'control_response', response: { subtype: 'success', request_id: f.request_id, response: {} } });
  if (f.type !== 'user') return;
  const id = `toolu_big_${++turn}`;
  write({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'tool_use', id, name: 'Bash', input: { command: 'cat big.log' } }] }, session_id });
  // Printable and varied, so no layer can shrink it.
  const row = 'lorem ipsum dolor sit amet, consectetur adipiscing elit 0123456789\n';
  const content = row.repeat(Math.ceil(size / row.length)).slice(0, size);
  write({ type: 'user', message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content }] }, session_id });
  write({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: `read ${content.length} bytes` }] }, session_id });
  write({ type: 'result', subtype: 'success', is_error: false, result: `read ${content.length} bytes`, session_id });
});
rl.on('close', () => process.exit(0));
