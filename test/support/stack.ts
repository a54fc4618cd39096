/**
 * An in-process Tether stack for end-to-end tests: gateway (HTTP/WebSocket edge + routing
 * core) and an agent that spawns real engine processes, all on 127.0.0.1 port 0. The agent
 * and the clients reach the gateway over the real wire.
 */
import { Agent, type AgentOptions } from '../../agent/agent.js';
import { GatewayClient } from '../../client/gateway-client.js';
import { Gateway, type GatewayLimits } from '../../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../../gateway/server.js';

export type TransportName = 'ws' | 'grpc';

/** Every pair of client transport × agent transport, for describe.each. */
export const TRANSPORT_PAIRS: { client: TransportName; agent: TransportName }[] = [
  { client: 'ws', agent: 'ws' },
  { client: 'grpc', agent: 'grpc' },
  { client: 'ws', agent: 'grpc' },
  { client: 'grpc', agent: 'ws' },
];

export interface StackOptions {
  engine: 'claude' | 'demo';
  /** How the agent reaches the gateway (default ws). */
  agentTransport?: TransportName;
  /** How clients reach the gateway (default ws). */
  clientTransport?: TransportName;
  /** Path of the claude executable when engine is claude. */
  engineCommand?: string;
  engineEnv?: NodeJS.ProcessEnv;
  cwd?: string;
  agentName?: string;
  limits?: Partial<GatewayLimits>;
  agentOptions?: Partial<AgentOptions>;
}

export interface Stack {
  gateway: Gateway;
  server: GatewayServer;
  agent: Agent;
  /** The URL clients use (per clientTransport). */
  url: string;
  wsUrl: string;
  grpcUrl: string;
  /** Opens a client; closed by stop(). */
  client(): Promise<GatewayClient>;
  stop(): Promise<void>;
}

export async function startStack(opts: StackOptions): Promise<Stack> {
  const gateway = new Gateway({ limits: opts.limits });
  const server = await startGatewayServer(gateway, { port: 0, grpcPort: 0 });
  const urlFor = (t: TransportName | undefined) => (t === 'grpc' ? server.grpcUrl! : server.url);
  const url = urlFor(opts.clientTransport);
  const agent = new Agent({
    gateway: urlFor(opts.agentTransport),
    name: opts.agentName ?? 'test-agent',
    engine: opts.engine,
    engineCommand: opts.engineCommand,
    engineEnv: opts.engineEnv,
    cwd: opts.cwd,
    eofGraceMs: 2_000,
    termGraceMs: 2_000,
    ...opts.agentOptions,
  });
  await agent.start();
  const clients: GatewayClient[] = [];
  return {
    gateway,
    server,
    agent,
    url,
    wsUrl: server.url,
    grpcUrl: server.grpcUrl!,
    async client() {
      const c = await GatewayClient.connect({ gateway: url, reconnect: false });
      clients.push(c);
      return c;
    },
    async stop() {
      await Promise.all(clients.map((c) => c.close()));
      await agent.shutdown(2_000);
      await server.close();
    },
  };
}

/** Rejects after `ms` with a message naming what was awaited. */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<T>((_, reject) => {
      t = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]);
}
