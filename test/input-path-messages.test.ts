/**
 * Messages per prompt round trip, counted on real sockets (issue 15, input path): a counting
 * proxy sits on the client's WebSocket and on the agent's, and a stand-in engine answers each
 * prompt with one line at once. A raw relay needs 4 messages (prompt up, to the engine's
 * host, its answer back, to the client). Tether folds the client's answer into the prompt
 * echo (`session.post`), the agent's input ack into the output it sends anyway and the
 * gateway's output ack into the next input (`acks.folded.v1`), leaving one message more
 * than a raw relay: the prompt echo every attached client sees. Against a gateway that does
 * not offer them, the same client and agent fall back to the base protocol: 7 messages.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer } from '../gateway/server.js';
import { until } from './support/items.js';
import { startWsMessageCounter, type WireMessage } from './support/ws-message-counter.js';

const ECHO_ENGINE = fileURLToPath(new URL('../bench/echo-engine.mjs', import.meta.url));
const ROUND_TRIPS = 20;
/** Acknowledgements that go alone only on a timer (nothing to ride on in time): counted and reported. */
const TIMED_ACKS = new Set(['session.ack', 'session.input_ack']);
/** What a gateway offers without the input path's capabilities (session.post.v1, acks.folded.v1). */
const BASE_CAPABILITIES: string[] = [];

const isEcho = (text: string) => (i: SessionItem) =>
  i.kind === 'engine' && i.message.type === 'assistant' && i.line.includes(`"text":"${text}"`);

interface Count {
  total: number;
  /** Messages per round trip, leaving out the acks that went alone on a timer. */
  perRoundTrip: number;
  count(pred: (m: WireMessage) => boolean): number;
}

describe('the input path on the wire', () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
    cleanups.length = 0;
  });

  /**
   * Gateway (offering `capabilities`), agent and client, each leg through a counting proxy; after
   * a warm-up prompt (which also moves the state to running), counts ROUND_TRIPS prompts and answers.
   */
  async function roundTrips(what: string, capabilities?: string[]): Promise<Count & { gateway: Gateway; session: RemoteSession }> {
    const gateway = new Gateway({ capabilities });
    const server = await startGatewayServer(gateway, { port: 0, auth: { verifier: 'off' } });
    cleanups.push(() => server.close());
    const clientLeg = await startWsMessageCounter(server.url);
    const agentLeg = await startWsMessageCounter(server.url);
    cleanups.push(
      () => clientLeg.close(),
      () => agentLeg.close(),
    );
    const agent = new Agent({
      gateway: agentLeg.url,
      name: 'count-agent',
      engine: 'claude',
      engineCommand: ECHO_ENGINE,
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(2_000));
    const client = await GatewayClient.connect({ gateway: clientLeg.url, reconnect: false });
    cleanups.push(() => client.close());
    const session = await client.createSession({ agent: 'count-agent' });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('warm-up');
    await until(items, isEcho('warm-up'), [], 20_000, 'the warm-up answer');

    clientLeg.reset();
    agentLeg.reset();
    for (let i = 0; i < ROUND_TRIPS; i++) {
      await session.sendUserMessage(`rt-${i}`);
      await until(items, isEcho(`rt-${i}`), [], 20_000, `the answer to rt-${i}`);
    }
    const seen: WireMessage[] = [...clientLeg.messages, ...agentLeg.messages];
    const count = (pred: (m: WireMessage) => boolean) => seen.filter(pred).length;
    const byKind = new Map<string, number>();
    for (const m of seen) byKind.set(`${m.dir} ${m.what}`, (byKind.get(`${m.dir} ${m.what}`) ?? 0) + 1);
    const timed = count((m) => TIMED_ACKS.has(m.what));
    const perRoundTrip = (seen.length - timed) / ROUND_TRIPS;
    console.log(
      `input-path messages (${what}): ${ROUND_TRIPS} round trips, ${seen.length} messages on the two sockets = ${(seen.length / ROUND_TRIPS).toFixed(2)} per round trip ` +
        `(${perRoundTrip.toFixed(2)} without the ${timed} timed acks); by kind: ${[...byKind].map(([k, n]) => `${k}=${n}`).join(', ')}`,
    );
    return { total: seen.length, perRoundTrip, count, gateway, session };
  }

  it(`with session.post and folded acks, one prompt round trip costs the raw relay's 4 messages and the prompt echo`, async () => {
    const { count, perRoundTrip, gateway, session } = await roundTrips('folded');
    // Each input's ack rode on its answer (or went alone, for a slow engine): none is left unconfirmed.
    await vi.waitFor(() => expect(gateway.directory.get(session.id)?.unconfirmedInputs).toBe(0), { timeout: 5_000, interval: 10 });
    // Per round trip: the prompt up, its echo down, the input to the agent, the output up, the frame down.
    expect(count((m) => m.dir === 'up' && m.what === 'session.post')).toBe(ROUND_TRIPS);
    expect(count((m) => m.dir === 'down' && m.what === 'agent.input')).toBe(ROUND_TRIPS);
    expect(count((m) => m.dir === 'up' && m.what === 'session.output')).toBe(ROUND_TRIPS);
    expect(count((m) => m.dir === 'down' && m.what === 'session.frame')).toBe(2 * ROUND_TRIPS); // the echo and the answer
    expect(count((m) => m.what === 'session.send' || m.what === 'response')).toBe(0);
    expect(perRoundTrip).toBe(5);
    // The agent's input acks ride on its output: at most a few go alone (a slow engine, on its timer).
    expect(count((m) => m.what === 'session.input_ack')).toBeLessThan(ROUND_TRIPS / 4);
    // The gateway's output acks ride on the next input: at most a few go alone, on their timer.
    expect(count((m) => m.what === 'session.ack')).toBeLessThan(ROUND_TRIPS / 4);
    expect(count((m) => m.what === 'agent.input' && m.head.includes('"ack":'))).toBeGreaterThan(ROUND_TRIPS / 2);
  }, 120_000);

  it('against a gateway that offers neither, the same client and agent speak the base protocol: 7 messages', async () => {
    const { count, perRoundTrip } = await roundTrips('base protocol', BASE_CAPABILITIES);
    expect(count((m) => m.what === 'session.post')).toBe(0);
    expect(count((m) => m.dir === 'up' && m.what === 'session.send')).toBe(ROUND_TRIPS);
    expect(count((m) => m.dir === 'down' && m.what === 'response')).toBe(ROUND_TRIPS);
    expect(count((m) => m.dir === 'up' && m.what === 'session.input_ack')).toBe(ROUND_TRIPS); // one per input, at once
    expect(count((m) => m.what === 'agent.input' && m.head.includes('"ack":'))).toBe(0);
    expect(count((m) => m.what === 'session.output' && m.head.includes('"input_ack":'))).toBe(0);
    expect(perRoundTrip + count((m) => m.what === 'session.input_ack') / ROUND_TRIPS).toBe(7);
  }, 120_000);
});
