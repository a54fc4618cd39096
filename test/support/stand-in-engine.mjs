// The skeleton of a stand-in engine: reads NDJSON on stdin, answers every control request
// with success, and hands each user message's text to `onUser(text, write)`, where `write`
// puts one line (a string, written as it is) on stdout, blocking until the pipe took it.
import { createInterface } from 'node:readline';
import { writeSync } from 'node:fs';

export function serveEngine(onUser) {
  const write = (text) => {
    const buf = Buffer.from(text + '\n');
    for (let off = 0; off < buf.length; ) off += writeSync(1, buf, off);
  };
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  rl.on('line', (line) => {
    const f = JSON.parse(line);
    if (f.type === 'control_request')
      write(JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: f.request_id, response: {} } }));
    if (f.type === 'user') {
      const content = f.message?.content;
      onUser(typeof content === 'string' ? content : JSON.stringify(content), write);
    }
  });
  rl.on('close', () => process.exit(0));
}
