#!/usr/bin/env node
// A stand-in engine that keeps quiet when prompted: each user message's text is appended to
// `prompts.log` in its working folder (so a test sees exactly what reached the engine, and how
// often), and only the prompt "answer" gets an answer (an assistant line and a result).
import { appendFileSync } from 'node:fs';
import { serveEngine } from './stand-in-engine.mjs';

serveEngine((prompt, write) => {
  appendFileSync('prompts.log', `${prompt}\n`);
  if (prompt !== 'answer') return;
  write(
    JSON.stringify({
      type: 'assistant',
      message: { role: 'assistant', content: [{ type: 'text', text: 'answered' }] },
      session_id: 'quiet',
    }),
  );
  write(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: 'answered', session_id: 'quiet' }));
});
