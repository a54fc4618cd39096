#!/usr/bin/env node
// A stand-in engine for the web page's long sessions (issue 28): for "turns N" it writes N
// finished turns (an answer in markdown and a result each) as fast as the pipe takes them;
// for "stream" one answer streamed in six deltas 300 ms apart ("stream N MS": N deltas MS ms
// apart, at most 1,000); for "code" an answer with a
// TypeScript code block; for "mix N" N frames in the sizes of a real session (the late-joiner
// figure, bench/web.mjs): in every 25, a tool call and its 5–50 KB result, then 23 short
// answers of 100–400 bytes; the last frame says "Mix done". Bounded: at most 10,000 turns
// (or frames) per prompt.
import { serveEngine } from './stand-in-engine.mjs';

const result = (i) =>
  JSON.stringify({
    type: 'result',
    subtype: 'success',
    is_error: false,
    duration_ms: 12,
    num_turns: 1,
    result: '',
    usage: { input_tokens: 40, output_tokens: 12 },
    total_cost_usd: 0.0001 * (i + 1),
    session_id: 'long',
  });
const answer = (id, text) =>
  JSON.stringify({ type: 'assistant', message: { id, role: 'assistant', content: [{ type: 'text', text }] }, session_id: 'long' });
const event = (id, ev) => JSON.stringify({ type: 'stream_event', api_message_id: id, event: ev, session_id: 'long' });
let turn = 0;

serveEngine((prompt, write) => {
  const many = /turns (\d+)/.exec(prompt);
  if (many) {
    const n = Math.min(Number(many[1]), 10_000);
    const lines = [];
    for (let i = 0; i < n; i++, turn++) {
      lines.push(
        answer(`msg_${turn}`, `Answer **${turn}**: the build is green.\n\n- checked \`step ${turn}\`\n- nothing else to do`),
        result(turn),
      );
      if (lines.length >= 200) write(lines.splice(0).join('\n'));
    }
    if (lines.length) write(lines.join('\n'));
  } else if (/^mix (\d+)/.test(prompt)) {
    const n = Math.min(Number(/^mix (\d+)/.exec(prompt)[1]), 10_000);
    const lines = [];
    for (let i = 0; i < n - 1; i++) {
      const k = i % 25;
      const id = `msg_${turn}_${i}`;
      if (k === 0)
        lines.push(
          JSON.stringify({
            type: 'assistant',
            message: {
              id,
              role: 'assistant',
              content: [{ type: 'tool_use', id: `toolu_${i}`, name: 'Read', input: { file_path: `src/f${i}.ts` } }],
            },
            session_id: 'long',
          }),
        );
      else if (k === 1) {
        const size = 5_000 + ((i * 7_919) % 45_001);
        const content = `// f${i - 1}.ts\n${'export const x = 1;\n'.repeat(Math.ceil(size / 20))}`.slice(0, size);
        lines.push(
          JSON.stringify({
            type: 'user',
            message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${i - 1}`, content }] },
            parent_tool_use_id: null,
            session_id: 'long',
          }),
        );
      } else lines.push(answer(id, `Step ${i}: ${'checked the build and the tests. '.repeat(3 + ((i * 37) % 10))}`));
      if (lines.length >= 200) write(lines.splice(0).join('\n'));
    }
    lines.push(answer(`msg_${turn++}_done`, `Mix done: ${n} frames.`));
    write(lines.join('\n'));
  } else if (/stream/.test(prompt)) {
    const id = `msg_${turn++}`;
    const sized = /stream (\d+) (\d+)/.exec(prompt);
    const pieces = sized
      ? Array.from({ length: Math.min(Number(sized[1]), 1_000) }, (_, i) => `word${i} `)
      : ['Streaming ', 'one ', 'piece ', 'at ', 'a ', 'time.'];
    const gapMs = sized ? Number(sized[2]) : 300;
    write(event(id, { type: 'message_start', message: { id } }));
    write(event(id, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
    let i = 0;
    const next = () => {
      if (i < pieces.length) {
        write(event(id, { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: pieces[i++] } }));
        setTimeout(next, gapMs);
      } else {
        write(answer(id, pieces.join('')));
        write(result(turn));
      }
    };
    next();
  } else if (/code/.test(prompt)) {
    write(answer(`msg_${turn++}`, 'Here:\n\n```ts\nexport const answer: number = 42; // the answer\n```\n'));
    write(result(turn));
  } else {
    write(answer(`msg_${turn++}`, `You said: ${prompt}`));
    write(result(turn));
  }
});
