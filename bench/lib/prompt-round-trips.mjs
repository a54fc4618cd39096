/**
 * Figure 1's round trip for the small benches (round-trip-cpu.mjs, round-trip-syscalls.mjs): one
 * small user message, then wait for the engine's answer, one at a time.
 */

/** The user line each round trip sends. */
export const userLine = (i) => ({
  type: 'user',
  message: { role: 'user', content: `ping ${i}` },
  parent_tool_use_id: null,
  session_id: 'default',
});

/** `n` sequential round trips: `send(i)` then wait until `onAnswer` is called. */
export async function roundTrips(n, send, setOnAnswer) {
  for (let i = 0; i < n; i++) {
    const answered = new Promise((resolve) => setOnAnswer(resolve));
    send(i);
    await answered;
  }
}

/** Reads a GatewayClient session; returns the setter of what each engine answer (an assistant line) calls. */
export function onEachAnswer(session) {
  let onAnswer = () => {};
  void (async () => {
    try {
      for await (const item of session) if (item.kind === 'engine' && item.line.startsWith('{"type":"as')) onAnswer();
    } catch {
      // closed
    }
  })();
  return (f) => (onAnswer = f);
}
