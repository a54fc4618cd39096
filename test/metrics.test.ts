import { describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import { Gateway } from '../gateway/gateway.js';
import { startRig, WRITE_FILE } from './support/engines.js';
import { eventually, scrape } from './support/metrics.js';
import { readTurn } from './support/turns.js';
import { cleanupsPerTest } from './support/cleanups.js';

/**
 * /metrics after a scripted session with the demo engine: a plain turn, a permission prompt
 * allowed, one denied; then a late viewer resuming from seq 1 past the bounded history, a
 * refused token, and the agent's link cut and re-established.
 */
describe('gateway metrics', () => {
  const cleanups = cleanupsPerTest();

  it('count what a scripted session did', async () => {
    const rig = cleanups.own(await startRig('demo', undefined, { limits: { replay: { maxFrames: 8, maxBytes: 8 * 1024 * 1024 } } }));
    const { stack } = rig;
    const port = stack.server.port;
    const client = await stack.client();
    const session = await client.createSession({ agent: 'test-agent' });
    const items = session[Symbol.asyncIterator]();

    await session.sendUserMessage('hello metrics');
    expect((await readTurn(session, () => undefined, items)).prompts).toEqual([]);
    await session.sendUserMessage(WRITE_FILE.demo.prompt);
    expect((await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }), items)).prompts).toHaveLength(1);
    await session.sendUserMessage(WRITE_FILE.demo.prompt);
    expect((await readTurn(session, () => ({ behavior: 'deny', message: 'no' }), items)).prompts).toHaveLength(1);

    // Settled: every frame the gateway broadcast went to the one client attached since seq 1.
    const lastSeq = async () => (await client.listSessions())[0].last_seq;
    const m = await eventually(
      async () => ({ before: await scrape(port), seq: await lastSeq(), after: await scrape(port) }),
      (r) =>
        r.before.get('tether_relay_frames_total{direction="to_client"}') ===
          r.after.get('tether_relay_frames_total{direction="to_client"}') &&
        r.after.get('tether_relay_frames_total{direction="to_client"}') === r.seq,
      'the session to settle',
    ).then((r) => r.after);

    // Inputs: three prompts and two answers, each handed to the agent once.
    expectMetrics(m, {
      'tether_agents_connected{transport="ws"}': 1,
      'tether_sessions{state="idle"}': 1,
      'tether_sessions{state="running"}': 0,
      'tether_clients_connected{transport="ws"}': 1,
      'tether_session_attachments{transport="ws"}': 1,
      'tether_relay_frames_total{direction="from_client"}': 5,
      'tether_relay_frames_total{direction="to_agent"}': 5,
    });
    expect(m.get('tether_relay_bytes_total{direction="from_client"}')).toBe(m.get('tether_relay_bytes_total{direction="to_agent"}'));
    const fromAgent = m.get('tether_relay_frames_total{direction="from_agent"}')!;
    expect(fromAgent).toBeGreaterThan(10);
    expect(m.get('tether_relay_bytes_total{direction="from_agent"}')).toBeGreaterThan(fromAgent);
    // Every engine line carried read_at_ms and reached the one client live.
    expect(m.get('tether_relay_latency_seconds_count')).toBe(fromAgent);
    expect(m.get('tether_relay_latency_seconds_bucket{le="+Inf"}')).toBe(fromAgent);
    expectMetrics(m, {
      tether_prompts_raised_total: 2,
      'tether_prompts_settled_total{outcome="allow"}': 1,
      'tether_prompts_settled_total{outcome="deny"}': 1,
      'tether_prompts_settled_total{outcome="expired"}': 0,
      'tether_prompt_decision_seconds_count{outcome="allow"}': 1,
      'tether_prompt_decision_seconds_count{outcome="deny"}': 1,
      'tether_resumes_total{role="client"}': 0,
      tether_replay_gaps_total: 0,
      tether_agent_reconnects_total: 0,
      'tether_slow_client_disconnects_total{transport="ws"}': 0,
    });

    // A viewer asks for history from seq 1: more than the 8 frames held, so a gap first.
    const viewer = await stack.client({ sub: 'viewer', scopes: ['view'] });
    await viewer.attach(session.id, { fromSeq: 1, readOnly: true });
    // A refused token.
    await expect(GatewayClient.connect({ gateway: stack.url, token: 'not-a-token', reconnect: false })).rejects.toThrow();
    // The agent's link is cut; it reconnects and resumes its session.
    stack.gateway.directory.agent('test-agent')!.peer.channel.close('UNAVAILABLE', 'test: cut the agent link');
    const after = await eventually(
      () => scrape(port),
      (v) => v.get('tether_agent_reconnects_total') === 1 && v.get('tether_agents_connected{transport="ws"}') === 1,
      'the agent to come back',
    );

    expectMetrics(after, {
      'tether_resumes_total{role="client"}': 1,
      tether_replay_gaps_total: 1,
      'tether_clients_connected{transport="ws"}': 2,
      'tether_session_attachments{transport="ws"}': 2,
      'tether_auth_failures_total{reason="malformed"}': 1,
      'tether_resumes_total{role="agent"}': 1,
    });
  });

  it('keeps each gateway in a registry of its own', async () => {
    const a = new Gateway();
    const b = new Gateway();
    a.metrics.authFailure('expired');
    const text = async (g: Gateway) => (await g.metrics.render()).body;
    expect(await text(a)).toContain('tether_auth_failures_total{reason="expired"} 1');
    expect(await text(b)).not.toContain('reason="expired"');
    expect((await a.metrics.render()).contentType).toMatch(/^text\/plain/);
    await Promise.all([a.close(), b.close()]);
  });

  it('counts relayed frames per client as read, and times each live frame once however many clients get it', async () => {
    const g = new Gateway();
    const frame = Buffer.from('{"jsonrpc":"2.0","method":"session.frame","params":{}}');
    const other = Buffer.from(frame);
    for (let client = 0; client < 3; client++) {
      g.metrics.relayed('to_client', frame.length);
      g.metrics.relayLatency(frame, Date.now());
    }
    g.metrics.relayLatency(other, Date.now());
    const text = (await g.metrics.render()).body;
    expect(text).toContain('tether_relay_frames_total{direction="to_client"} 3');
    expect(text).toContain(`tether_relay_bytes_total{direction="to_client"} ${3 * frame.length}`);
    expect(text).toContain('tether_relay_latency_seconds_count 2');
    // Read twice: what was folded in stays, nothing is added again.
    expect((await g.metrics.render()).body).toContain('tether_relay_frames_total{direction="to_client"} 3');
    await g.close();
  });
});

/** The named metrics have exactly these values (all compared at once, so a failure shows every difference). */
function expectMetrics(scraped: Map<string, number>, expected: Record<string, number>): void {
  expect(Object.fromEntries(Object.keys(expected).map((name) => [name, scraped.get(name)]))).toEqual(expected);
}
