/**
 * No timer due within milliseconds on the prompt round trip. On a host where programming a
 * near kernel timer traps to the hypervisor (a Firecracker microVM: the benchmarks' host), a
 * timer due in a few ms made every process on the CPU dearer: the prompt echo's 2-ms hold, re-armed
 * at every prompt, cost a quarter of the round trip (docs/performance-notebook.md, Latency: "a
 * timer due within milliseconds is dear on this host"). Gateway, agent and client run in this
 * process here, so every timer our code arms or re-arms during steady round trips is seen: no
 * round trip may arm one due sooner than {@link NEAR_MS}. A few may be armed over the run: the
 * output acks' timer runs again when its oldest ack is next due, which is soon after a stall of
 * the machine (gateway/directory/agent-link.ts); a timer per prompt arms one every round trip.
 * Timers of Node's own modules (net, http2) do not go through the global functions and are not
 * counted; they are the raw relay's too.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { until } from './support/items.js';
import { startStack, TRANSPORT_PAIRS, withTimeout, type Stack } from './support/stack.js';

const ECHO_ENGINE = fileURLToPath(new URL('../bench/echo-engine.mjs', import.meta.url));
const ROUND_TRIPS = 30;
/** Sooner than this is a near timer (the acks' timers age over 100 ms; the post deadline is 30 s). */
const NEAR_MS = 50;
/** Near timers allowed over the run (a stall's ack timer); a timer per round trip arms ROUND_TRIPS. */
const NEAR_ALLOWED = 3;

const isAnswer = (text: string) => (i: SessionItem) =>
  i.kind === 'engine' && i.message.type === 'assistant' && i.line.includes(`"text":"${text}"`);

/** The delays of every timer armed (setTimeout, setInterval) or re-armed (refresh) while `run` runs. */
async function timersArmedDuring(run: () => Promise<void>): Promise<number[]> {
  const delays: number[] = [];
  const probe = setTimeout(() => {}, 1_000);
  const timeoutProto = Object.getPrototypeOf(probe) as { refresh: (this: { _idleTimeout: number }) => unknown };
  clearTimeout(probe);
  const realRefresh = timeoutProto.refresh;
  const onTimeout = vi.spyOn(globalThis, 'setTimeout');
  const onInterval = vi.spyOn(globalThis, 'setInterval');
  timeoutProto.refresh = function (this: { _idleTimeout: number }) {
    if (this._idleTimeout >= 0) delays.push(this._idleTimeout); // -1: a cleared timer, which refresh leaves unarmed (a socket's idle timer when it has none)
    return realRefresh.call(this);
  };
  try {
    await run();
  } finally {
    timeoutProto.refresh = realRefresh;
    for (const spy of [onTimeout, onInterval]) {
      for (const args of spy.mock.calls) delays.push(Number(args[1] ?? 0));
      spy.mockRestore();
    }
  }
  return delays;
}

describe.each(TRANSPORT_PAIRS)('prompt round trips, client over $client, agent over $agent', ({ client, agent }) => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it(`arm no timer due within ${NEAR_MS} ms per round trip in the gateway, the agent or the library`, async () => {
    stack = await startStack({ engine: 'claude', engineCommand: ECHO_ENGINE, auth: 'off', clientTransport: client, agentTransport: agent });
    const c = await stack.client();
    const session = await withTimeout(c.createSession({ agent: 'test-agent' }), 20_000, 'create');
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('warm-up');
    await until(items, isAnswer('warm-up'), [], 20_000, 'the warm-up answer');

    const delays = await timersArmedDuring(async () => {
      for (let i = 0; i < ROUND_TRIPS; i++) {
        await session.sendUserMessage(`rt-${i}`);
        await until(items, isAnswer(`rt-${i}`), [], 20_000, `the answer to rt-${i}`);
      }
    });
    const near = delays.filter((ms) => ms < NEAR_MS);
    expect(near.length, `near timers armed (ms): ${near.join(', ')}`).toBeLessThanOrEqual(NEAR_ALLOWED);
  });
});
