/**
 * Slow but alive links (threats B9, B10): the agent's and the client's links both go through
 * proxies that throttle each direction to 32 KB/s and add random delays, and a turn carries a
 * 1 MiB tool result. The turn completes and no liveness check cuts a link, with every
 * heartbeat shortened (application pings every 500 ms, dead after 1 s; WebSocket pings every
 * 1 s, dead after 1 s): a check that could not tell "slow" from "dead" would cut within a
 * second or two, while the tool result takes over ten seconds (ten dead-after bounds) to cross
 * both links.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { SessionItem } from '../client/remote-session.js';
import type { LinkStatus } from '../core/link/link.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { FaultProxy } from './support/fault-proxy.js';
import { isEngineItem, isResult, stringAt, until } from './support/items.js';
import { cleanupsPerTest } from './support/cleanups.js';

const ENGINE = fileURLToPath(new URL('./support/big-tool-result-engine.mjs', import.meta.url));
const TOOL_RESULT_BYTES = 256 * 1024;
const THROTTLE = { bytesPerSecond: 32 * 1024, latencyMs: 5, jitterMs: 60, maxBufferedBytes: 64 * 1024 };
const HEARTBEAT = { intervalMs: 500, timeoutMs: 1_000 };
const WS_PING = { pingIntervalMs: 1_000, pingTimeoutMs: 1_000 };
const WS_DIAL = { ws: WS_PING };

describe('slow but alive links', () => {
  const cleanups = cleanupsPerTest();

  it('a 256 KiB tool result crosses two 32 KB/s links with random delays; no heartbeat cuts either link', { timeout: 90_000 }, async () => {
    const server: GatewayServer = await startGatewayServer(new Gateway({ limits: { heartbeat: HEARTBEAT } }), { port: 0, ...WS_PING });
    cleanups.push(() => server.close());
    const agentProxy = await FaultProxy.start({ targetPort: server.port, ...THROTTLE });
    const clientProxy = await FaultProxy.start({ targetPort: server.port, ...THROTTLE });
    cleanups.push(
      () => agentProxy.close(),
      () => clientProxy.close(),
    );

    const downs: string[] = [];
    const watch = (who: string) => (s: LinkStatus) => {
      if (s.state === 'down' || (s.state === 'closed' && s.error)) downs.push(`${who}: ${s.state} ${'error' in s ? s.error?.message : ''}`);
    };
    const agent = new Agent({
      gateway: agentProxy.url('ws'),
      name: 'slow',
      engine: 'claude',
      engineCommand: ENGINE,
      engineEnv: { TETHER_TOOL_RESULT_BYTES: String(TOOL_RESULT_BYTES) },
      heartbeat: HEARTBEAT,
      dial: WS_DIAL,
      onStatus: watch('agent'),
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const client = await GatewayClient.connect({
      gateway: clientProxy.url('ws'),
      heartbeat: HEARTBEAT,
      dial: WS_DIAL,
      onStatus: watch('client'),
    });
    cleanups.push(() => client.close());

    const session = await client.createSession({ agent: 'slow' });
    const t0 = Date.now();
    await session.sendUserMessage('read the big log');
    const seen: SessionItem[] = [];
    await until(session[Symbol.asyncIterator](), isResult, seen, 75_000, 'the turn with the 256 KiB tool result');
    const elapsed = Date.now() - t0;
    const toolResult = seen.filter(isEngineItem).find((i) => i.message.type === 'user');
    const content = stringAt(toolResult?.message, 'message', 'content', 0, 'content');
    console.log(
      `[slow-link] 256 KiB tool result over two throttled links (32 KB/s, 5-65 ms delays): turn took ${elapsed} ms; link drops: ${downs.length}`,
    );

    expect(content.length).toBe(TOOL_RESULT_BYTES);
    expect(downs).toEqual([]);
    // One connection each, the whole time: nothing was cut and re-dialled.
    expect(agentProxy.accepted).toBe(1);
    expect(clientProxy.accepted).toBe(1);
    expect(elapsed).toBeGreaterThan(10_000); // the throttle really held the bytes back: ten dead-after bounds
  });
});
