#!/usr/bin/env node
// A stand-in engine for durability under load: answers control requests, and for a user
// message "burst N" writes N assistant lines (numbered n = 0..N-1) as fast as the pipe takes
// them, then a result.
import { createInterface } from 'node:readline';
import { writeSync } from 'node:fs';

const write = (text) => {
  const buf = Buffer.from(text + '\n');
  for (let off = 0; off < buf.length; ) off += writeSync(1, buf, off);
};

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  const f = JSON.parse(line);
  if (f.type === 'control_request') write(JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: f.request_id, response: {} } }));
  if (f.type === 'user') {
    const n = Number(/burst (\d+)/.exec(String(f.message?.content))?.[1] ?? 0);
    const chunk = [];
    for (let i = 0; i < n; i++) {
      chunk.push(JSON.stringify({ type: 'assistant', n: i, message: { role: 'assistant', content: [{ type: 'text', text: `frame ${i}` }] }, session_id: 'burst' }));
      if (chunk.length === 100) write(chunk.splice(0).join('\n'));
    }
    if (chunk.length) write(chunk.join('\n'));
    write(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: `burst of ${n}`, session_id: 'burst' }));
  }
});
rl.on('close', () => process.exit(0));
