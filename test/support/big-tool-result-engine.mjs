#!/usr/bin/env node
// A stand-in engine for slow links: for each user message it runs one "tool" whose result is
// TETHER_TOOL_RESULT_BYTES bytes (default 1 MiB): an assistant tool_use line, a user
// tool_result line of that size, a short assistant text and a result.
import { serveEngine } from './stand-in-engine.mjs';

const size = Number(process.env.TETHER_TOOL_RESULT_BYTES ?? 1024 * 1024);
const session_id = 'big-tool';
// Printable and varied, so no layer can shrink it.
const row = 'lorem ipsum dolor sit amet, consectetur adipiscing elit 0123456789\n';
const content = row.repeat(Math.ceil(size / row.length)).slice(0, size);
let turn = 0;

serveEngine((_text, write) => {
  const id = `toolu_big_${++turn}`;
  const line = (obj) => write(JSON.stringify(obj));
  line({
    type: 'assistant',
    message: { role: 'assistant', content: [{ type: 'tool_use', id, name: 'Bash', input: { command: 'cat big.log' } }] },
    session_id,
  });
  line({ type: 'user', message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content }] }, session_id });
  line({
    type: 'assistant',
    message: { role: 'assistant', content: [{ type: 'text', text: `read ${content.length} bytes` }] },
    session_id,
  });
  line({ type: 'result', subtype: 'success', is_error: false, result: `read ${content.length} bytes`, session_id });
});
