import { afterEach, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { LinkStatus } from '../core/link/link.js';
import { FaultProxy } from './support/fault-proxy.js';
import { startStack, type Stack } from './support/stack.js';
import { waitFor } from './support/wait.js';

const BEAT = { intervalMs: 1_000, timeoutMs: 1_000 };
const BOUND_MS = BEAT.intervalMs + BEAT.timeoutMs;
const SLACK_MS = 1_500; // scheduling on a shared 2-core machine

/**
 * A half-open link (the peer stops answering without closing) is found within heartbeat
 * interval + timeout on both legs and both transports, and reported as a clear event.
 */
describe.each(['ws', 'grpc'] as const)('half-open links over %s', (transport) => {
  let stack: Stack | undefined;
  let proxy: FaultProxy | undefined;
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
    await proxy?.close();
    await stack?.stop();
  });

  async function setup() {
    stack = await startStack({ engine: 'demo', limits: { heartbeat: BEAT } });
    const target = transport === 'ws' ? stack.server.port : stack.server.grpcPort!;
    proxy = await FaultProxy.start({ targetPort: target });
    return { stack, proxy };
  }

  it('client leg: the client reports the link down, the gateway drops the client', async () => {
    const { stack, proxy } = await setup();
    const statuses: LinkStatus[] = [];
    const client = await GatewayClient.connect({
      gateway: proxy.url(transport),
      token: stack.token,
      heartbeat: BEAT,
      onStatus: (s) => statuses.push(s),
    });
    closers.push(() => client.close());
    const session = await client.createSession({ agent: 'test-agent' });
    const members = () => stack.gateway.directory.get(session.id)?.info().clients.length ?? 0;
    expect(members()).toBe(1);
    proxy.halfOpen();
    const clientMs = await waitFor(() => statuses.some((s) => s.state === 'down'), BOUND_MS + SLACK_MS, 'client noticing');
    const gatewayMs = await waitFor(() => members() === 0, BOUND_MS + SLACK_MS, 'gateway noticing');
    const down = statuses.find((s) => s.state === 'down') as Extract<LinkStatus, { state: 'down' }>;
    expect(down.error.message).toMatch(/heartbeat|pong/);
    console.log(
      `liveness ${transport} client leg: client noticed after ${clientMs} ms, gateway after ${gatewayMs} ms (bound ${BOUND_MS} ms)`,
    );
  });

  it('agent leg: the agent reconnects, the gateway marks its sessions agent-lost', async () => {
    const { stack, proxy } = await setup();
    const statuses: LinkStatus[] = [];
    const token = await stack.mint({ kind: 'agent', sub: 'far-agent', agent: 'far-agent' });
    const agent = new Agent({
      gateway: proxy.url(transport),
      name: 'far-agent',
      token,
      engine: 'demo',
      heartbeat: BEAT,
      onStatus: (s) => statuses.push(s),
    });
    await agent.start();
    closers.push(() => agent.shutdown(1_000));
    const client = await stack.client();
    const session = await client.createSession({ agent: 'far-agent' });
    const state = () => stack.gateway.directory.get(session.id)?.currentState;
    await waitFor(() => state() === 'idle', 5_000, 'session idle');
    proxy.halfOpen();
    const agentMs = await waitFor(() => statuses.some((s) => s.state === 'down'), BOUND_MS + SLACK_MS, 'agent noticing');
    const gatewayMs = await waitFor(() => state() === 'agent-lost', BOUND_MS + SLACK_MS, 'gateway noticing');
    console.log(`liveness ${transport} agent leg: agent noticed after ${agentMs} ms, gateway after ${gatewayMs} ms (bound ${BOUND_MS} ms)`);
    // The agent dials again through the proxy (new connections are forwarded) and the session recovers.
    await waitFor(() => state() === 'idle', 10_000, 'session back to idle after the reconnect');
  });
});
