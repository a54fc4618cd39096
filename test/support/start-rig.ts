/**
 * A gateway with one agent whose link (and, optionally, a client's) runs through a fault
 * proxy, and whose engines are counted (counting-engine.ts): for tests of what happens when
 * links drop while sessions start, stop or attach. Everything on 127.0.0.1, port 0.
 */
import { Agent } from '../../agent/agent.js';
import { GatewayClient } from '../../client/gateway-client.js';
import type { GatewayLimits } from '../../gateway/gateway.js';
import { makeTempDir } from './claude-cli.js';
import { countingEngine, type CountingEngine } from './counting-engine.js';
import { FaultProxy } from './fault-proxy.js';
import { startStack, type Stack, type TransportName } from './stack.js';

export const FAST_BACKOFF = { initialMs: 20, factor: 1.5, maxMs: 150, jitter: 0.2 };
/** Heartbeats short enough that a half-open link is noticed within about a second, on both transports. */
export const FAST_PING = { ws: { pingIntervalMs: 300, pingTimeoutMs: 700 }, connectTimeoutMs: 3_000 };
export const HEARTBEAT = { intervalMs: 300, timeoutMs: 700 };

export interface StartRig {
  stack: Stack;
  agent: Agent;
  agentName: string;
  /** The agent's link to the gateway runs through this proxy. */
  agentProxy: FaultProxy;
  /** Clients made with proxiedClient() run through this one. */
  clientProxy: FaultProxy;
  engine: CountingEngine;
  cwd: string;
  transport: TransportName;
  /** A client straight to the gateway (no faults), reconnecting. */
  client(): Promise<GatewayClient>;
  /** A client through the client proxy, reconnecting fast. */
  proxiedClient(): Promise<GatewayClient>;
  stop(): Promise<void>;
}

export interface StartRigOptions {
  transport: TransportName;
  /** The engine's argv (default: the demo engine); the agent's own arguments follow. */
  engineArgv: string[];
  /** Each engine start waits this long first (a slow spawn to cut into). */
  delayS?: number;
  limits?: Partial<GatewayLimits>;
  engineEnv?: NodeJS.ProcessEnv;
  agentName?: string;
}

export async function startRig(o: StartRigOptions): Promise<StartRig> {
  const dir = makeTempDir('tether-start-');
  const agentName = o.agentName ?? 'flaky-agent';
  const stack = await startStack({
    engine: 'demo',
    agentTransport: o.transport,
    clientTransport: o.transport,
    limits: { heartbeat: { intervalMs: 500, timeoutMs: 1_000 }, ...o.limits },
  });
  const targetPort = o.transport === 'ws' ? stack.server.port : stack.server.grpcPort!;
  const agentProxy = await FaultProxy.start({ targetPort });
  const clientProxy = await FaultProxy.start({ targetPort });
  const engine = countingEngine(dir.path, o.engineArgv, { delayS: o.delayS });
  const agent = new Agent({
    gateway: agentProxy.url(o.transport),
    name: agentName,
    token: await stack.mint({ kind: 'agent', sub: agentName }),
    engine: 'claude',
    engineCommand: engine.command,
    engineEnv: o.engineEnv,
    cwd: dir.path,
    backoff: FAST_BACKOFF,
    dial: FAST_PING,
    heartbeat: HEARTBEAT,
    // Long enough for a turn to finish after stdin EOF on a busy machine (the drop-in's EOF
    // ends its session this way and expects the engine's own exit code, 0).
    eofGraceMs: 3_000,
    termGraceMs: 500,
  });
  await agent.start();
  const clients: GatewayClient[] = [];
  const connect = async (gateway: string) => {
    const c = await GatewayClient.connect({
      gateway,
      token: stack.token,
      backoff: FAST_BACKOFF,
      dial: FAST_PING,
      heartbeat: HEARTBEAT,
      reconnectWaitMs: 15_000,
    });
    clients.push(c);
    return c;
  };
  return {
    stack,
    agent,
    agentName,
    agentProxy,
    clientProxy,
    engine,
    cwd: dir.path,
    transport: o.transport,
    client: () => connect(o.transport === 'ws' ? stack.wsUrl : stack.grpcUrl),
    proxiedClient: () => connect(clientProxy.url(o.transport)),
    async stop() {
      await Promise.all(clients.map((c) => c.close()));
      await agent.shutdown(1_000);
      await agentProxy.close();
      await clientProxy.close();
      await stack.stop();
      dir.cleanup();
    },
  };
}
