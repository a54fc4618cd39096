#!/usr/bin/env node
// A stand-in engine for size limits: answers initialize, then for each user message writes
// one assistant line of TETHER_BIG_LINE_BYTES bytes (default 16 MiB), dense with characters
// that JSON must escape (so our envelope's worst case is exercised), then a result.
import { createInterface } from 'node:readline';
import { writeSync } from 'node:fs';

const target = Number(process.env.TETHER_BIG_LINE_BYTES ?? 16 * 1024 * 1024);
const write = (obj) => {
  const buf = Buffer.from(JSON.stringify(obj) + '\n');
  for (let off = 0; off < buf.length; ) off += writeSync(1, buf, off);
};

function bigAssistant() {
  const skeleton = JSON.stringify({
    type: 'assistant',
    message: { role: 'assistant', content: [{ type: 'text', text: '' }] },
    session_id: 'big',
  });
  // Each '"' becomes '\"' in the line: two bytes of line per character of text.
  const chars = Math.floor((target - skeleton.length - 1) / 2);
  return { type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: '"'.repeat(chars) }] }, session_id: 'big' };
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  const f = JSON.parse(line);
  if (f.type === 'control_request')
    write({ type: 'control_response', response: { subtype: 'success', request_id: f.request_id, response: {} } });
  if (f.type === 'user') {
    write(bigAssistant());
    write({ type: 'result', subtype: 'success', is_error: false, result: 'big', session_id: 'big' });
  }
});
rl.on('close', () => process.exit(0));
