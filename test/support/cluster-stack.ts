/**
 * A cluster for end-to-end tests: a real nats-server with JetStream (requiring a user and
 * password, which the gateways are given as an operator would: --cluster-user and
 * TETHER_CLUSTER_PASSWORD), N `tether gateway --cluster` processes (authentication on, one
 * shared key file, so a token works on every gateway and they share the fabric's MAC key), a load balancer in front of them that sends each new connection to the first
 * gateway that accepts it (so an agent behind it moves when its gateway dies), and an agent
 * running the real Claude Code CLI against the scripted fake Messages API. Every process and
 * port is stopped in `stop()`.
 */
import type { KeyObject } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent } from '../../agent/agent.js';
import { GatewayClient } from '../../client/gateway-client.js';
import { generateTokenKey, writeKeyFile } from '../../core/auth/keygen.js';
import { mintLoginCode } from '../../core/auth/login-codes.js';
import { mintToken } from '../../core/auth/mint.js';
import { signInUrl } from '../../bin/sign-in-link.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './claude-cli.js';
import { startTether, type Daemon } from './cli.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './fake-anthropic.js';
import { startNatsServer, type NatsServer } from './nats-server.js';
import { FAST_BACKOFF } from './restartable-stack.js';
import { withTimeout } from './stack.js';
import type { Telemetry } from '../../core/telemetry/tracer.js';

export interface ClusterGateway {
  daemon: Daemon;
  /** ws://127.0.0.1:PORT */
  url: string;
  /** grpc://127.0.0.1:PORT */
  grpcUrl: string;
  /** The gateway's id in the cluster (from its `cluster:` line). */
  id: string;
  /** Its state folder (revocations, audit trail, pins). */
  stateDir: string;
}

export interface ClusterStack {
  nats: NatsServer;
  gateways: ClusterGateway[];
  /** The load balancer in front of the gateways (first live gateway, in order), which the agent uses. */
  balancer: Balancer;
  agent: Agent;
  /** The agent's working folder. */
  cwd: string;
  fake: FakeAnthropic;
  /** A client token of principal `sub` (with `scopes`; none: create + control), good on every gateway. */
  token(sub: string, scopes?: string[]): Promise<string>;
  /** A single-use sign-in link for the web page of gateway `n`, for `sub` (with `scopes`). */
  signInLink(n: number, sub: string, scopes?: string[]): Promise<string>;
  /** A single-use web sign-in code of principal `sub` (what a sign-in link carries), good on every gateway. */
  loginCode(sub: string): Promise<string>;
  /** An agent token for agent `name` (its sub), good on every gateway. */
  agentToken(name: string): Promise<string>;
  /**
   * A client of principal `sub` on gateway `n` (reconnecting, fast backoff; WebSocket unless
   * `grpc`; `list`: it also knows every other gateway's URL, after n's, and fails over along
   * them); closed by stop().
   */
  client(n: number, sub: string, transport?: 'ws' | 'grpc', list?: 'list'): Promise<GatewayClient>;
  /**
   * Stops gateway `n` (SIGTERM) and runs it again on its state folder; it listens on new ports
   * (`gateways[n]` is replaced; the balancer still names the old one).
   */
  restartGateway(n: number): Promise<ClusterGateway>;
  stop(): Promise<void>;
}

/** The NATS server as deploy/nats-cluster.conf runs it (its permissions: a subject a gateway needs and lacks shows). */
export const DEPLOYED_NATS = {
  config: {
    file: fileURLToPath(new URL('../../deploy/nats-cluster.conf', import.meta.url)),
    user: 'tether-gateway',
    passwordEnv: 'TETHER_NATS_PASSWORD',
  },
} as const;

/** A scripted turn: one Bash call (a permission prompt), then the answer; `ok` after. */
export const BASH_TURN = {
  responses: [
    { text: 'Running it.', tool_use: { name: 'Bash', input: { command: 'echo hi >> made.txt', description: 'append a line' } } },
    { text: 'Done.' },
  ],
  fallback: { text: 'ok' },
};

/** Each teardown step is bounded, and one that hangs is named. */
const STEP_TIMEOUT_MS = 10_000;
const named = (what: string, step: () => Promise<unknown>) => () => withTimeout(step(), STEP_TIMEOUT_MS, `${what} to stop`);

/** The `cluster:` line a gateway prints: `cluster: URL (gateway ID)`. */
const CLUSTER_LINE = /^cluster: \S+ \(gateway (\S+)\)$/;
/** A gateway process (node) starting while the rest of the suite runs beside it on a busy 2-core machine (15 s was missed with two cluster files at once under load). */
const GATEWAY_START_MS = 45_000;

/**
 * `scenario`: what the scripted model answers the real CLI. `engineCommand`: a stand-in engine
 * to run instead (it speaks the CLI's stdio protocol). `agentDials`: the balancer (default) or
 * the list of every gateway's URL, in order (the agent fails over along it).
 */
export async function startClusterStack(opts: {
  gateways: number;
  scenario?: FakeScenario;
  engineCommand?: string;
  gatewayArgs?: string[];
  agentDials?: 'balancer' | 'list';
  /** How the NATS server runs (default: requiring a user and password, which the gateways are given). */
  nats?: Parameters<typeof startNatsServer>[0];
  /** The agent's host key (default none). */
  agentHostKey?: KeyObject;
  /** Added to each gateway's environment (e.g. OTEL_* for traces). */
  gatewayEnv?: NodeJS.ProcessEnv;
  /** The agent's tracing. */
  agentTelemetry?: Telemetry;
}): Promise<ClusterStack> {
  const dirs: TempDir[] = [];
  const temp = (prefix: string) => {
    const d = makeTempDir(prefix);
    dirs.push(d);
    return d.path;
  };
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  try {
    const nats = await startNatsServer(opts.nats);
    cleanups.push(named('nats-server', () => nats.stop()));
    const generated = generateTokenKey('HS256');
    const keyFile = join(temp('tether-key-'), 'key.jwk');
    writeKeyFile(keyFile, generated.privateJwk);
    const mint = (kind: 'agent' | 'client', sub: string, scopes?: string[]) =>
      mintToken({ key: generated.key, kind, sub, scopes, agent: kind === 'agent' ? sub : undefined, ttlSeconds: 3600 });
    const gateways: ClusterGateway[] = [];
    /** Gateway `n`'s process (its own state folder); a restart runs it again on the same folder. */
    const startGateway = async (n: number, stateDir: string): Promise<ClusterGateway> => {
      // The state folder (audit trail, pins) through the environment: --key and --state-dir exclude each other on one command line.
      // NATS authentication as an operator sets it up: a user, its password in the environment.
      const natsUser = nats.user ? ['--cluster-user', nats.user] : [];
      const daemon = startTether(
        [
          'gateway',
          '--port',
          '0',
          '--grpc-port',
          '0',
          '--key',
          keyFile,
          '--cluster',
          nats.url,
          ...natsUser,
          '--log-level',
          'warn',
          ...(opts.gatewayArgs ?? []),
        ],
        {
          env: { ...opts.gatewayEnv, TETHER_STATE_DIR: stateDir, ...(nats.pass ? { TETHER_CLUSTER_PASSWORD: nats.pass } : {}) },
        },
      );
      cleanups.push(named(`gateway ${n}`, () => daemon.stop('SIGKILL')));
      const url = (await daemon.line('gateway: ', GATEWAY_START_MS)).slice('gateway: '.length);
      const grpcUrl = (await daemon.line('grpc: ')).slice('grpc: '.length);
      const id = CLUSTER_LINE.exec(await daemon.line('cluster: '))?.[1];
      if (!id) throw new Error(`gateway ${n} printed no cluster line: ${daemon.stdout()}`);
      return { daemon, url, grpcUrl, id, stateDir };
    };
    for (let n = 0; n < opts.gateways; n++) gateways.push(await startGateway(n, temp('tether-gw-')));
    const balancer = await startBalancer(gateways.map((g) => Number(new URL(g.url).port)));
    cleanups.push(named('balancer', () => balancer.close()));
    const fake = await startFakeAnthropic(opts.scenario ?? { responses: [] });
    cleanups.push(named('fake model', () => fake.close()));
    const cwd = temp('tether-cwd-');
    const agent = new Agent({
      gateway: opts.agentDials === 'list' ? gateways.map((g) => g.url) : balancer.url,
      name: 'builder',
      token: await mint('agent', 'builder'),
      engine: 'claude',
      engineCommand: opts.engineCommand ?? claudeBinaryPath(),
      engineEnv: claudeTestEnv({ home: temp('tether-home-'), baseUrl: fake.url }),
      cwd,
      hostKey: opts.agentHostKey,
      telemetry: opts.agentTelemetry,
      backoff: FAST_BACKOFF,
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
    });
    await agent.start();
    cleanups.push(named('agent', () => agent.shutdown(1_000)));
    // The fleet lists the agent on every gateway before the test begins.
    const probe = await GatewayClient.connect({ gateway: gateways.at(-1)!.url, token: await mint('client', 'probe'), reconnect: false });
    cleanups.push(named('probe client', () => probe.close()));
    const deadline = Date.now() + 15_000;
    while (!(await probe.listAgents()).some((a) => a.name === 'builder')) {
      if (Date.now() > deadline) throw new Error('the agent was not listed across the cluster within 15 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const clients: GatewayClient[] = [];
    return {
      nats,
      gateways,
      balancer,
      agent,
      cwd,
      fake,
      token: (sub, scopes) => mint('client', sub, scopes),
      signInLink: async (n, sub, scopes) =>
        signInUrl(`http://127.0.0.1:${new URL(gateways[n].url).port}`, await mintLoginCode(generated.key, { sub, scopes })),
      loginCode: (sub) => mintLoginCode(generated.key, { sub }),
      agentToken: (name) => mint('agent', name),
      async client(n, sub, transport = 'ws', list) {
        const urls = gateways.map((g) => (transport === 'grpc' ? g.grpcUrl : g.url));
        const c = await GatewayClient.connect({
          gateway: list ? [...urls.slice(n), ...urls.slice(0, n)] : urls[n],
          token: await mint('client', sub),
          backoff: FAST_BACKOFF,
        });
        clients.push(c);
        return c;
      },
      async restartGateway(n) {
        await gateways[n].daemon.stop();
        gateways[n] = await startGateway(n, gateways[n].stateDir);
        return gateways[n];
      },
      async stop() {
        await withTimeout(Promise.all(clients.splice(0).map((c) => c.close())), STEP_TIMEOUT_MS, 'the clients to close');
        for (const c of cleanups.reverse()) await c();
        for (const d of dirs) d.cleanup();
      },
    };
  } catch (err) {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
    for (const d of dirs) d.cleanup();
    throw err;
  }
}

/** The load balancer in front of the gateways. */
export interface Balancer {
  url: string;
  /** Takes backend `n` out: its relayed connections are cut, new ones skip it (it stays up). */
  drain(n: number): void;
  close(): Promise<void>;
}

/** A TCP load balancer on 127.0.0.1:0: each new connection goes to the first backend port that accepts it. */
async function startBalancer(ports: number[]): Promise<Balancer> {
  const sockets = new Set<Socket>();
  const drained = new Set<number>();
  const byBackend = new Map<number, Set<Socket>>(ports.map((_, n) => [n, new Set<Socket>()]));
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  };
  const dial = (n: number, inbound: Socket): void => {
    if (n >= ports.length) return void inbound.destroy();
    if (drained.has(n)) return dial(n + 1, inbound);
    const out = connect(ports[n], '127.0.0.1');
    out.once('error', () => dial(n + 1, inbound));
    out.once('connect', () => {
      track(out);
      byBackend.get(n)!.add(inbound);
      inbound.on('close', () => byBackend.get(n)!.delete(inbound));
      inbound.pipe(out);
      out.pipe(inbound);
      inbound.on('close', () => out.destroy());
      out.on('close', () => inbound.destroy());
      inbound.resume();
    });
  };
  const server = createServer({ pauseOnConnect: true }, (inbound) => {
    track(inbound);
    dial(0, inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    drain(n) {
      drained.add(n);
      for (const s of byBackend.get(n)!) s.destroy();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
