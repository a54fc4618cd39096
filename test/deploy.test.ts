import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { AGENT_CONFIG } from '../agent/config.js';
import { loadConfig } from '../core/config/load.js';
import { GATEWAY_CONFIG } from '../gateway/config.js';
import { READYZ_PATH } from '../gateway/listen/listen-http-ops.js';
import { makeTempDir } from './support/claude-cli.js';
import { runTether } from './support/cli.js';

const ROOT = new URL('..', import.meta.url).pathname;
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

interface ComposeService {
  build?: unknown;
  image?: string;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  volumes?: string[];
  ports?: string[];
  profiles?: string[];
}

const compose = parseYaml(read('docker-compose.yml'), { merge: true }) as {
  services: Record<string, ComposeService>;
  volumes: Record<string, unknown>;
};
/** The services that run our image (its entry point is `tether`), without a profile. */
const tetherServices = Object.entries(compose.services).filter(([, s]) => s.build === '.' && !s.profiles);
/** The services of the cluster profile (three gateways on one NATS server). */
const clusterServices = Object.fromEntries(Object.entries(compose.services).filter(([, s]) => s.profiles?.includes('cluster')));

/** Help text of `tether CMD`, fetched once per command. */
const helpCache = new Map<string, Promise<{ code: number | null; stdout: string }>>();
const helpOf = (cmd: string) => helpCache.get(cmd) ?? helpCache.set(cmd, runTether([cmd, '--help'])).get(cmd)!;

describe('docker-compose.yml uses only what the CLI has', () => {
  it('runs gateway, agent-token and agent from the one image', () => {
    expect(tetherServices.map(([name, s]) => [name, s.command?.[0]])).toEqual([
      ['gateway', 'gateway'],
      ['agent-token', 'token'],
      ['agent', 'agent'],
    ]);
  });

  it.each(tetherServices.map(([name, s]) => ({ name, s })))('$name: its command and its TETHER_* variables exist', async ({ s }) => {
    const [cmd, ...args] = s.command!;
    const help = await helpOf(cmd);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain(`Usage: tether ${cmd}`);
    const flags = args.filter((a) => a.startsWith('--'));
    const names = Object.keys(s.environment ?? {}).filter((n) => n.startsWith('TETHER_'));
    expect([...flags, ...names], 'every service is configured by flags or TETHER_* variables').not.toHaveLength(0);
    for (const flag of flags) expect(help.stdout, `${cmd} ${flag}`).toMatch(new RegExp(`(^|\\s)${flag}\\b`));
    for (const name of names) expect(help.stdout, `${cmd} ${name}`).toContain(name);
  });

  it('its variables load as a valid gateway and agent configuration', () => {
    const gateway = loadConfig(GATEWAY_CONFIG, { env: compose.services.gateway.environment, flags: {} }).config;
    expect(gateway).toMatchObject({ host: '0.0.0.0', port: 7800, grpcPort: 7801, stateDir: '/var/lib/tether' });
    const tmp = makeTempDir('tether-compose-');
    try {
      const token = join(tmp.path, 'agent.token');
      writeFileSync(token, 'eyJ.a.b\n');
      const env = { ...compose.services.agent.environment, TETHER_TOKEN_FILE: token };
      const agent = loadConfig(AGENT_CONFIG, { env, flags: {} }).config;
      expect(agent).toMatchObject({
        gateway: 'ws://gateway:7800',
        name: 'build-1',
        engine: ['demo'],
        token: 'eyJ.a.b',
        labels: { env: 'compose' },
      });
    } finally {
      tmp.cleanup();
    }
    // The token the one-shot service writes is the file the agent reads, for the agent name it registers as.
    const tokenArgs = compose.services['agent-token'].command!;
    expect(tokenArgs[tokenArgs.indexOf('--out') + 1]).toBe(compose.services.agent.environment!.TETHER_TOKEN_FILE);
    expect(tokenArgs[tokenArgs.indexOf('--agent') + 1]).toBe(compose.services.agent.environment!.TETHER_AGENT);
  });

  it('checks the gateway with /readyz on its own port, and starts the agent after its token', () => {
    const g = compose.services.gateway;
    expect(g.healthcheck!.test.join(' ')).toContain(`http://127.0.0.1:${g.environment!.TETHER_PORT}${READYZ_PATH}`);
    expect(g.ports).toEqual(expect.arrayContaining([expect.stringMatching(/:7800$/), expect.stringMatching(/:7801$/)]));
    expect(compose.services['agent-token'].depends_on).toEqual({ gateway: { condition: 'service_healthy' } });
    expect(compose.services.agent.depends_on).toEqual({ 'agent-token': { condition: 'service_completed_successfully' } });
    expect(Object.keys(compose.volumes).sort()).toEqual(
      expect.arrayContaining(['agent-key', 'agent-secrets', 'gateway-state', 'workspace']),
    );
  });

  it.skipIf(!hasDockerCompose())(
    'passes docker-compose config, also with each profile (skipped only where docker-compose is not installed; .ci/run installs it)',
    () => {
      for (const profile of [[], ['--profile', 'monitoring'], ['--profile', 'cluster']]) {
        execFileSync('docker-compose', ['-f', join(ROOT, 'docker-compose.yml'), ...profile, 'config', '-q'], { stdio: 'pipe' });
      }
    },
  );
});

describe('docker-compose.yml, cluster profile: three gateways on one NATS server', () => {
  const gateways = ['gateway-1', 'gateway-2', 'gateway-3'];

  it('has NATS with JetStream, three gateways of our image and an agent given all three', () => {
    expect(Object.keys(clusterServices).sort()).toEqual([
      'cluster-agent',
      'cluster-agent-token',
      'cluster-nats-password',
      'gateway-1',
      'gateway-2',
      'gateway-3',
      'nats',
    ]);
    const natsStart = clusterServices.nats.entrypoint!.join(' ');
    for (const arg of ['--jetstream', '--store_dir', '--config /etc/nats/tether.conf']) expect(natsStart).toContain(arg);
    expect(clusterServices.nats.volumes).toContain('./deploy/nats-cluster.conf:/etc/nats/tether.conf:ro');
    for (const g of gateways) expect([clusterServices[g].build, clusterServices[g].command]).toEqual(['.', ['gateway']]);
    const published = gateways.flatMap((g) => clusterServices[g].ports!.map((p) => p.split(':')[0]));
    expect(new Set([...published, '7800', '7801']).size).toBe(published.length + 2); // none clashes with another or with the single gateway
  });

  it('every gateway verifies with one signing key (gateway-1 makes it) and keeps its own state folder', () => {
    const [one, two, three] = gateways.map((g) => clusterServices[g]);
    const volumeOf = (s: ComposeService, path: string) => s.volumes!.find((v) => v.split(':')[1] === path)?.split(':')[0];
    for (const s of [two, three]) {
      const keyDir = s.environment!.TETHER_KEY_FILE.replace(/\/gateway-key\.json$/, '');
      expect(volumeOf(s, keyDir)).toBe(volumeOf(one, one.environment!.TETHER_STATE_DIR));
      expect(s.depends_on).toEqual({ 'gateway-1': { condition: 'service_healthy' } });
    }
    const states = [one, two, three].map((s) => volumeOf(s, s.environment!.TETHER_STATE_DIR));
    expect(new Set(states).size).toBe(3);
    expect(one.depends_on).toEqual({ nats: { condition: 'service_healthy' } });
    // The agent's token is minted from that key, for the name the agent registers as.
    const token = clusterServices['cluster-agent-token'];
    expect(volumeOf(token, token.environment!.TETHER_STATE_DIR)).toBe(states[0]);
    const agentEnv = clusterServices['cluster-agent'].environment!;
    expect(token.command![token.command!.indexOf('--agent') + 1]).toBe(agentEnv.TETHER_AGENT);
    expect(token.command![token.command!.indexOf('--out') + 1]).toBe(agentEnv.TETHER_TOKEN_FILE);
  });

  it("each gateway's variables exist in tether gateway --help and load as a gateway of the cluster", async () => {
    const help = (await helpOf('gateway')).stdout;
    for (const g of gateways) {
      const env = clusterServices[g].environment!;
      for (const name of Object.keys(env)) expect(help, `${g} ${name}`).toContain(name);
      // The key file is another container's volume: checked above; here only what the gateway reads itself.
      const { TETHER_KEY_FILE: _key, TETHER_CLUSTER_PASSWORD_FILE: passwordFile, ...rest } = env;
      // NATS authenticates it: its user, with the password cluster-nats-password made, read from a volume NATS reads too.
      expect(rest.TETHER_CLUSTER_USER).toBe('tether-gateway');
      const secrets = (s: ComposeService, file: string) => s.volumes!.find((v) => file.startsWith(v.split(':')[1] + '/'))?.split(':')[0];
      expect(secrets(clusterServices[g], passwordFile)).toBe('cluster-nats-secrets');
      expect(clusterServices.nats.volumes).toContain('cluster-nats-secrets:/run/tether-nats:ro');
      expect(clusterServices['cluster-nats-password'].volumes).toEqual(['cluster-nats-secrets:/secrets']);
      rest.TETHER_CLUSTER_PASSWORD = 'p-checked-elsewhere';
      expect(loadConfig(GATEWAY_CONFIG, { env: rest, flags: {} }).config).toMatchObject({
        host: '0.0.0.0',
        port: 7800,
        grpcPort: 7801,
        cluster: 'nats://nats:4222',
      });
    }
  });

  it('declares exactly the named volumes its services use', () => {
    const used = Object.values(compose.services).flatMap((s) =>
      (s.volumes ?? []).map((v) => v.split(':')[0]).filter((v) => !v.startsWith('.') && !v.startsWith('/') && !v.startsWith('$')),
    );
    expect(Object.keys(compose.volumes).sort()).toEqual([...new Set(used)].sort());
  });

  it("the agent's variables load as an agent configuration with the three gateways", () => {
    const tmp = makeTempDir('tether-compose-');
    try {
      const token = join(tmp.path, 'agent.token');
      writeFileSync(token, 'eyJ.a.b\n');
      const env = { ...clusterServices['cluster-agent'].environment, TETHER_TOKEN_FILE: token };
      expect(loadConfig(AGENT_CONFIG, { env, flags: {} }).config.gateway).toEqual(gateways.map((g) => `ws://${g}:7800`));
    } finally {
      tmp.cleanup();
    }
  });
});

describe('Dockerfile and systemd unit', () => {
  it('builds in two stages, runs production dependencies as a non-root user with tether as the entry point', () => {
    const dockerfile = read('Dockerfile');
    expect(dockerfile.match(/^FROM /gm)).toHaveLength(2);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^USER tether$/m);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["tether"\]$/m);
    expect(read('.dockerignore')).toMatch(/^node_modules$/m);
  });

  it('the agent unit runs tether agent with variables the agent knows', async () => {
    const unit = read('docs/tether-agent.service');
    expect(unit).toMatch(/^ExecStart=\/usr\/bin\/env tether agent$/m);
    const help = (await helpOf('agent')).stdout;
    const names = [...unit.matchAll(/^Environment=(TETHER_[A-Z_]+)=/gm)].map((m) => m[1]!);
    expect(names, 'the unit configures the agent with TETHER_* variables').not.toHaveLength(0);
    for (const name of names) expect(help, name).toContain(name);
  });
});

function hasDockerCompose(): boolean {
  try {
    execFileSync('docker-compose', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
