/**
 * Messages per prompt round trip, counted on real sockets (issue 15, input path): a counting
 * proxy sits on the client's WebSocket and on the agent's, and a stand-in engine answers each
 * prompt with one line at once. A raw relay needs 4 messages (prompt up, to the engine's
 * host, its answer back, to the client). Tether folds the client's answer into the prompt
 * echo (`session.post`), the agent's input ack into the output it sends anyway and the
 * gateway's output ack into the next input (`acks.folded.v1`), leaving one message more
 * than a raw relay: the prompt echo every attached client sees.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { until } from './support/items.js';
import { startWsMessageCounter, type WireMessage, type WsMessageCounter } from './support/ws-message-counter.js';

const ECHO_ENGINE = fileURLToPath(new URL('../bench/echo-engine.mjs', import.meta.url));
const ROUND_TRIPS = 20;
/** Acknowledgements that go alone only on a timer (nothing to ride on in time): counted and reported. */
const TIMED_ACKS = new Set(['session.ack', 'session.input_ack']);

const isEcho = (text: string) => (i: SessionItem) => i.kind === 'engine' && i.message.type === 'assistant' && i.line.includes(`"text":"${text}"`);

describe('the input path on the wire', () => {
  let server: GatewayServer;
  let agent: Agent;
  let client: GatewayClient;
  let clientLeg: WsMessageCounter;
  let agentLeg: WsMessageCounter;
  let gateway: Gateway;
  let session: RemoteSession;
  let items: AsyncIterator<SessionItem>;

  beforeAll(async () => {
    gateway = new Gateway({});
    server = await startGatewayServer(gateway, { port: 0, auth: { verifier: 'off' } });
    clientLeg = await startWsMessageCounter(server.url);
    agentLeg = await startWsMessageCounter(server.url);
    agent = new Agent({ gateway: agentLeg.url, name: 'count-agent', engine: 'claude', engineCommand: ECHO_ENGINE, eofGraceMs: 1_000, termGraceMs: 1_000 });
    await agent.start();
    client = await GatewayClient.connect({ gateway: clientLeg.url, reconnect: false });
    session = await client.createSession({ agent: 'count-agent' });
    items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('warm-up'); // the first prompt also moves the state to running
    await until(items, isEcho('warm-up'), [], 20_000, 'the warm-up answer');
  }, 60_000);

  afterAll(async () => {
    await client?.close();
    await agent?.shutdown(2_000);
    await server?.close();
    await clientLeg?.close();
    await agentLeg?.close();
  });

  it(`one prompt round trip costs the raw relay's 4 messages and the prompt echo; nothing else per round trip`, async () => {
    clientLeg.reset();
    agentLeg.reset();
    for (let i = 0; i < ROUND_TRIPS; i++) {
      await session.sendUserMessage(`rt-${i}`);
      await until(items, isEcho(`rt-${i}`), [], 20_000, `the answer to rt-${i}`);
    }
    // Each input's ack rode on its answer (or went alone, for a slow engine): none is left unconfirmed.
    await vi.waitFor(() => expect(gateway.directory.get(session.id)?.unconfirmedInputs).toBe(0), { timeout: 5_000, interval: 10 });
    const seen: WireMessage[] = [...clientLeg.messages, ...agentLeg.messages];
    const count = (pred: (m: WireMessage) => boolean) => seen.filter(pred).length;
    const byKind = new Map<string, number>();
    for (const m of seen) byKind.set(`${m.dir} ${m.what}`, (byKind.get(`${m.dir} ${m.what}`) ?? 0) + 1);
    const timed = count((m) => TIMED_ACKS.has(m.what));
    const perRoundTrip = (seen.length - timed) / ROUND_TRIPS;
    console.log(
      `input-path messages: ${ROUND_TRIPS} round trips, ${seen.length} messages on the two sockets = ${(seen.length / ROUND_TRIPS).toFixed(2)} per round trip ` +
        `(${perRoundTrip.toFixed(2)} without the ${timed} timed acks); by kind: ${[...byKind].map(([k, n]) => `${k}=${n}`).join(', ')}`,
    );
    // Per round trip: the prompt up, its echo down, the input to the agent, the output up, the frame down.
    expect(count((m) => m.dir === 'up' && m.what === 'session.post')).toBe(ROUND_TRIPS);
    expect(count((m) => m.dir === 'down' && m.what === 'agent.input')).toBe(ROUND_TRIPS);
    expect(count((m) => m.dir === 'up' && m.what === 'session.output')).toBe(ROUND_TRIPS);
    expect(count((m) => m.dir === 'down' && m.what === 'session.frame')).toBe(2 * ROUND_TRIPS); // the echo and the answer
    expect(perRoundTrip).toBe(5);
    // The agent's input acks ride on its output: at most a few go alone (a slow engine, on its timer).
    expect(count((m) => m.what === 'session.input_ack')).toBeLessThan(ROUND_TRIPS / 4);
    // The gateway's output acks ride on the next input: at most a few go alone, on their timer.
    expect(count((m) => m.what === 'session.ack')).toBeLessThan(ROUND_TRIPS / 4);
    expect(count((m) => m.what === 'agent.input' && m.head.includes('"ack":'))).toBeGreaterThan(ROUND_TRIPS / 2);
  }, 120_000);
});
