import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { AGENT_CONFIG } from '../agent/config.js';
import { loadConfig } from '../core/config/load.js';
import { GATEWAY_CONFIG } from '../gateway/config.js';
import { READYZ_PATH } from '../gateway/listen-http-ops.js';
import { makeTempDir } from './support/claude-cli.js';
import { runTether } from './support/cli.js';

const ROOT = new URL('..', import.meta.url).pathname;
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

interface ComposeService {
  build?: unknown;
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  volumes?: string[];
  ports?: string[];
}

const compose = parseYaml(read('docker-compose.yml'), { merge: true }) as { services: Record<string, ComposeService>; volumes: Record<string, unknown> };
/** The services that run our image (its entry point is `tether`). */
const tetherServices = Object.entries(compose.services).filter(([, s]) => s.build === '.');

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
      expect(agent).toMatchObject({ gateway: 'ws://gateway:7800', name: 'build-1', engine: 'demo', token: 'eyJ.a.b', labels: { env: 'compose' } });
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
    expect(Object.keys(compose.volumes).sort()).toEqual(['agent-key', 'agent-secrets', 'gateway-state', 'workspace']);
  });

  it.skipIf(!hasDockerCompose())('passes docker-compose config (skipped only where docker-compose is not installed; .ci/run installs it)', () => {
    execFileSync('docker-compose', ['-f', join(ROOT, 'docker-compose.yml'), 'config', '-q'], { stdio: 'pipe' });
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
