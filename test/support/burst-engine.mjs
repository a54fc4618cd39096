#!/usr/bin/env node
// A stand-in engine for durability under load: for a user message "burst N" it writes N
// assistant lines (numbered n = 0..N-1) as fast as the pipe takes them, then a result.
import { serveEngine } from './stand-in-engine.mjs';

serveEngine((prompt, write) => {
  const n = Number(/burst (\d+)/.exec(prompt)?.[1] ?? 0);
  const chunk = [];
  for (let i = 0; i < n; i++) {
    chunk.push(
      JSON.stringify({
        type: 'assistant',
        n: i,
        message: { role: 'assistant', content: [{ type: 'text', text: `frame ${i}` }] },
        session_id: 'burst',
      }),
    );
    if (chunk.length === 100) write(chunk.splice(0).join('\n'));
  }
  if (chunk.length) write(chunk.join('\n'));
  write(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: `burst of ${n}`, session_id: 'burst' }));
});
