#!/usr/bin/env node
// A stand-in engine whose lines are not in JSON.stringify's form (see odd-json-lines.mjs):
// answers every control request, and for each user message writes one odd turn; a prompt
// containing "big" adds a ~16 MiB line.
import { createInterface } from 'node:readline';
import { writeSync } from 'node:fs';
import { oddTurn } from './odd-json-lines.mjs';

const write = (text) => {
  const buf = Buffer.from(text + '\n');
  for (let off = 0; off < buf.length; ) off += writeSync(1, buf, off);
};

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  const f = JSON.parse(line);
  if (f.type === 'control_request') write(JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: f.request_id, response: {} } }));
  if (f.type === 'user') {
    const content = f.message?.content;
    const prompt = typeof content === 'string' ? content : JSON.stringify(content);
    for (const l of oddTurn(prompt, prompt.includes('big'))) write(l);
  }
});
rl.on('close', () => process.exit(0));
