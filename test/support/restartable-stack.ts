/**
 * A gateway with a file store and authentication on, that a test can restart on the same
 * ports (its sessions, history and role decisions read back from the store; the audit trail
 * and the usage ledger in files of their own), with one agent
 * that reconnects by itself: the demo engine, or the real Claude Code CLI against the scripted
 * fake Messages API. Clients are minted per principal and scope.
 */
import { join } from 'node:path';
import { Agent, type AgentOptions } from '../../agent/agent.js';
import { GatewayClient } from '../../client/gateway-client.js';
import { generateTokenKey } from '../../core/auth/keygen.js';
import { mintToken } from '../../core/auth/mint.js';
import { TokenVerifier } from '../../core/auth/verify.js';
import { Gateway, type GatewayLimits } from '../../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../../gateway/server.js';
import { FileSessionStore, type SessionStore } from '../../gateway/session/session-store.js';
import { FileAuditLog } from '../../gateway/audit/audit-log.js';
import type { PolicyProvider } from '../../gateway/policy/policy-source.js';
import { UsageLedger } from '../../gateway/usage/usage-ledger.js';
import { FileUsageStore } from '../../gateway/usage/usage-store.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic } from './fake-anthropic.js';
import type { TransportName } from './stack.js';
import { waitFor } from './wait.js';

export const FAST_BACKOFF = { initialMs: 100, factor: 1.5, maxMs: 400, jitter: 0.2 };

export interface RestartableStack {
  /** The gateway running now (a new object after each restart). */
  gateway: Gateway;
  agent: Agent;
  /** The agents' working folder and the gateway's state folder. */
  cwd: string;
  state: string;
  /** The scripted model the real CLI talks to (engine 'claude' only). */
  fake: FakeAnthropic | undefined;
  url(t: TransportName): string;
  /** A client token of principal `sub` with these scopes (none: create + control). */
  token(sub: string, scopes?: string[]): Promise<string>;
  /** A client of principal `sub` with these scopes (none: create + control); closed by stop(). */
  client(t: TransportName, sub: string, scopes?: string[]): Promise<GatewayClient>;
  /**
   * Closes the gateway and starts a new one on the same ports and store (`whileDown` runs in
   * between, e.g. to edit the store); waits for the agent to register again.
   */
  restart(whileDown?: () => void): Promise<void>;
  stop(): Promise<void>;
}

export async function startRestartable(
  opts: {
    engine?: 'demo' | 'claude';
    agentOptions?: Partial<AgentOptions>;
    limits?: Partial<GatewayLimits> /** The store over the state folder (default: a FileSessionStore). */;
    store?: (dir: string) => SessionStore;
    /** The central policy of every gateway started (e.g. budgets); default: none. */
    policy?: PolicyProvider;
  } = {},
): Promise<RestartableStack> {
  const cwd = makeTempDir('tether-cwd-');
  const state = makeTempDir('tether-state-');
  const auditDir = makeTempDir('tether-audit-'); // beside the store, so the store folder holds only sessions
  let home: TempDir | undefined;
  let fake: FakeAnthropic | undefined;
  let engine: Partial<AgentOptions> = { engine: 'demo' };
  if (opts.engine === 'claude') {
    home = makeTempDir('tether-home-');
    fake = await startFakeAnthropic({ responses: [], fallback: { text: 'ok' } });
    engine = { engine: 'claude', engineCommand: claudeBinaryPath(), engineEnv: claudeTestEnv({ home: home.path, baseUrl: fake.url }) };
  }
  const key = generateTokenKey('HS256').key;
  const mint = (kind: 'agent' | 'client', sub: string, scopes?: string[]) =>
    mintToken({ key, kind, sub, scopes, agent: kind === 'agent' ? sub : undefined, ttlSeconds: 3600 });
  let gateway!: Gateway;
  const boot = async (port = 0, grpcPort = 0): Promise<GatewayServer> => {
    gateway = new Gateway({
      store: opts.store?.(state.path) ?? new FileSessionStore(state.path),
      audit: new FileAuditLog(join(auditDir.path, 'audit.jsonl')),
      usage: new UsageLedger(new FileUsageStore(join(auditDir.path, 'usage.jsonl'))),
      policy: opts.policy,
      limits: opts.limits,
    });
    return startGatewayServer(gateway, { port, grpcPort, auth: { verifier: new TokenVerifier({ keys: [key] }) } });
  };
  let server = await boot();
  const agent = new Agent({
    gateway: server.url,
    name: 'builder',
    token: await mint('agent', 'builder'),
    ...engine,
    cwd: cwd.path,
    backoff: FAST_BACKOFF,
    eofGraceMs: 1_000,
    termGraceMs: 1_000,
    ...opts.agentOptions,
  });
  await agent.start();
  const clients: GatewayClient[] = [];
  const waitForAgent = () => waitFor(() => gateway.directory.agent('builder') !== undefined, 15_000, 'the agent to come back');
  const stack: RestartableStack = {
    get gateway() {
      return gateway;
    },
    agent,
    cwd: cwd.path,
    state: state.path,
    fake,
    url: (t) => (t === 'grpc' ? server.grpcUrl! : server.url),
    token: (sub, scopes) => mint('client', sub, scopes),
    async client(t, sub, scopes) {
      const c = await GatewayClient.connect({ gateway: stack.url(t), token: await mint('client', sub, scopes), reconnect: false });
      clients.push(c);
      return c;
    },
    async restart(whileDown) {
      await Promise.all(clients.splice(0).map((c) => c.close()));
      const [port, grpcPort] = [server.port, server.grpcPort];
      await server.close();
      whileDown?.();
      server = await boot(port, grpcPort);
      await waitForAgent();
    },
    async stop() {
      await Promise.all(clients.splice(0).map((c) => c.close()));
      await agent.shutdown(1_000);
      await server.close();
      await fake?.close();
      for (const d of [cwd, state, auditDir, home]) d?.cleanup();
    },
  };
  return stack;
}
