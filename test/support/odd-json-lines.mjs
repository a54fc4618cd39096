// Engine lines that JSON.stringify would never write: spaces after colons and commas, keys in
// an unusual order, \u00e9 and \/ escapes, and (on request) a 16 MiB line of escapes. Shared by
// the stand-in engine that writes them and the tests that expect them back byte for byte.

/** The lines of one turn, in order; `big` adds a ~16 MiB assistant line before the result. */
export function oddTurn(prompt, big = false) {
  const said = JSON.stringify(String(prompt)).slice(1, -1);
  const lines = [
    '{ "session_id" : "odd",  "type" : "system", "subtype" : "status" , "status" : null }',
    `{"session_id":"odd","message":{"content":[{"text":"caf\\u00e9 \\/ ${said}","type":"text"}],"role":"assistant","id":"msg_odd"},"type":"assistant","parent_tool_use_id":null}`,
    '{"type":"stream_event","event":{"delta":{"text":"\\u00e9\\u00e8\\ud83d\\ude00 \\/\\/","type":"text_delta"},"index":0,"type":"content_block_delta"},"session_id":"odd"}',
  ];
  if (big) lines.push(bigLine());
  lines.push(`{"result" : "ok" ,"type":"result","subtype":"success","is_error":false,"session_id":"odd","num_turns":1}`);
  return lines;
}

/** Just under 16 MiB: a text of `\u00e9` escapes (6 bytes of line per character). */
export function bigLine(bytes = 16 * 1024 * 1024 - 1024) {
  const head = '{"type":"assistant", "message":{"role":"assistant","content":[{"type":"text","text":"';
  const tail = '"}]},"session_id":"odd"}';
  const n = Math.floor((bytes - head.length - tail.length) / 6);
  return head + '\\u00e9'.repeat(n) + tail;
}
