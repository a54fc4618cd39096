/**
 * An in-process Tether stack for end-to-end tests: gateway (HTTP/WebSocket edge + routing
 * core) and an agent that spawns real engine processes, all on 127.0.0.1 port 0. The agent
 * and the clients reach the gateway over the real wire. Authentication is on unless
 * `auth: 'off'`: each stack gets a fresh key, its agent an agent token, and client() a
 * client token (sub "test-user", no scopes: create + control everywhere).
 */
import { Agent, type AgentOptions } from '../../agent/agent.js';
import { acpEndpoint } from '../../bin/acp-endpoint.js';
import { GatewayClient } from '../../client/gateway-client.js';
import { generateTokenKey } from '../../core/auth/keygen.js';
import type { DoorLimits } from '../../gateway/door/door-limits.js';
import { LoginDesk } from '../../core/auth/login-codes.js';
import { BrowserSessions } from '../../gateway/door/browser-sessions.js';
import type { TokenAlg, TokenKey } from '../../core/auth/keys.js';
import { mintToken } from '../../core/auth/mint.js';
import { TokenVerifier } from '../../core/auth/verify.js';
import type { Logger } from '../../core/logging.js';
import type { AuditLog } from '../../gateway/audit/audit-log.js';
import { Gateway, type GatewayLimits } from '../../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../../gateway/server.js';
import type { PolicyProvider } from '../../gateway/policy/policy-source.js';
import type { Telemetry } from '../../core/telemetry/tracer.js';
import type { NotifyEndpoints } from '../../gateway/listen/listen-http-notify.js';

export type TransportName = 'ws' | 'grpc';

/** Every pair of client transport × agent transport, for describe.each. */
export const TRANSPORT_PAIRS: { client: TransportName; agent: TransportName }[] = [
  { client: 'ws', agent: 'ws' },
  { client: 'grpc', agent: 'grpc' },
  { client: 'ws', agent: 'grpc' },
  { client: 'grpc', agent: 'ws' },
];

export interface StackOptions {
  engine: NonNullable<AgentOptions['engine']>;
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
  /** Authentication (default on, HS256, the real clock); 'off' admits everyone as anonymous. */
  auth?: 'off' | StackAuthOptions;
  /** Logger of the gateway, agent and clients (default silent). */
  logger?: Logger;
  /** Where the gateway writes its audit trail (default: in memory). */
  audit?: AuditLog;
  /** The gateway's central policy (default: no rules). */
  policy?: PolicyProvider;
  /** The gateway's frame limit (default CHANNEL_DEFAULTS.maxFrameBytes). */
  maxFrameBytes?: number;
  /** The door's limits (gateway/door/door-limits.ts), over its defaults. */
  doorLimits?: Partial<DoorLimits>;
  /** The gateway's tracing (the agent's goes in agentOptions). */
  telemetry?: Telemetry;
  /** The notification endpoints (/v1/notify/), built over the gateway (e.g. an AttentionDesk); default none. */
  notify?: (gateway: Gateway) => NotifyEndpoints;
}

/** How a stack authenticates. */
export interface StackAuthOptions {
  /** Key algorithm (default HS256). */
  alg?: TokenAlg;
  /** The gateway's clock for token checks (and the issue time of tokens the stack mints). */
  now?: () => Date;
  /** Browser origins allowed besides the gateway's own. */
  allowOrigins?: string[];
}

/** What to mint with {@link Stack.mint}. */
export interface MintRequest {
  kind: 'agent' | 'client';
  sub: string;
  agent?: string;
  scopes?: string[];
  ttlSeconds?: number;
}

/** Options of {@link Stack.client}. */
export interface ClientOptions {
  /** Token to present (default: a fresh client token for sub/scopes below). */
  token?: string;
  sub?: string;
  scopes?: string[];
}

export interface Stack {
  gateway: Gateway;
  server: GatewayServer;
  agent: Agent;
  /** The URL clients use (per clientTransport). */
  url: string;
  wsUrl: string;
  grpcUrl: string;
  /** The stack's signing key (undefined with auth off). */
  key?: TokenKey;
  /** A client token for sub "test-user" (e.g. TETHER_TOKEN for CLI tests); undefined with auth off. */
  token?: string;
  /** Mints a token with the stack's key and clock. Throws with auth off. */
  mint(req: MintRequest): Promise<string>;
  /** Opens a client; closed by stop(). */
  client(opts?: ClientOptions): Promise<GatewayClient>;
  stop(): Promise<void>;
}

export async function startStack(opts: StackOptions): Promise<Stack> {
  const authOpts = opts.auth === 'off' ? undefined : (opts.auth ?? {});
  const key = authOpts ? generateTokenKey(authOpts.alg ?? 'HS256').key : undefined;
  const mint = async (req: MintRequest): Promise<string> => {
    if (!key) throw new Error('this stack runs with auth off: no tokens');
    return mintToken({
      key,
      kind: req.kind,
      sub: req.sub,
      agent: req.agent,
      scopes: req.scopes,
      ttlSeconds: req.ttlSeconds ?? 3600,
      now: authOpts?.now?.(),
    });
  };
  const gateway = new Gateway({
    limits: opts.limits,
    logger: opts.logger,
    audit: opts.audit,
    policy: opts.policy,
    telemetry: opts.telemetry,
  });
  const server = await startGatewayServer(gateway, {
    port: 0,
    grpcPort: 0,
    logger: opts.logger,
    maxFrameBytes: opts.maxFrameBytes,
    doorLimits: opts.doorLimits,
    acp: acpEndpoint(), // as the CLI's gateway does
    notify: opts.notify?.(gateway),
    auth: key
      ? {
          verifier: new TokenVerifier({ keys: [key], now: authOpts?.now }),
          allowOrigins: authOpts?.allowOrigins,
          login: new LoginDesk(key, { now: authOpts?.now }),
          browser: new BrowserSessions(),
        }
      : { verifier: 'off' },
  });
  const urlFor = (t: TransportName | undefined) => (t === 'grpc' ? server.grpcUrl! : server.url);
  const url = urlFor(opts.clientTransport);
  const agentName = opts.agentName ?? 'test-agent';
  const token = key ? await mint({ kind: 'client', sub: 'test-user' }) : undefined;
  const agent = new Agent({
    gateway: urlFor(opts.agentTransport),
    name: agentName,
    token: key ? await mint({ kind: 'agent', sub: agentName }) : undefined,
    logger: opts.logger,
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
    key,
    token,
    mint,
    async client(o: ClientOptions = {}) {
      const own =
        o.token ?? (key && (o.sub || o.scopes) ? await mint({ kind: 'client', sub: o.sub ?? 'test-user', scopes: o.scopes }) : token);
      const c = await GatewayClient.connect({ gateway: url, token: own, reconnect: false, logger: opts.logger });
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

export { withTimeout } from './wait.js';
