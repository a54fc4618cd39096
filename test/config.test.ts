import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AGENT_CONFIG } from '../agent/config.js';
import { UP_CONFIG } from '../bin/up-config.js';
import { generateTokenKey, writeKeyFile } from '../core/auth/keygen.js';
import { keysOf } from '../core/config/keys.js';
import { ConfigError, loadConfig, type ConfigInputs } from '../core/config/load.js';
import { MASK, renderConfig } from '../core/config/print.js';
import { GATEWAY_CONFIG, gatewayLimitsOf } from '../gateway/config.js';
import { operatorWebhooks } from '../gateway/attention/notify-keys.js';
import { GATEWAY_DEFAULTS } from '../gateway/gateway.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { runTether } from './support/cli.js';

let dir: TempDir;
beforeEach(() => {
  dir = makeTempDir('tether-config-');
});
afterEach(() => dir.cleanup());

/** Writes a file into the test's folder; returns its path. */
function file(name: string, text: string): string {
  const path = join(dir.path, name);
  writeFileSync(path, text);
  return path;
}

const loadGateway = (inputs: ConfigInputs) => loadConfig(GATEWAY_CONFIG, { env: {}, ...inputs });

/** The problems a configuration is refused with. */
function problemsOf(load: () => unknown): string[] {
  try {
    load();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('the configuration was accepted');
}

describe('configuration: file, then TETHER_* variables, then flags', () => {
  it('takes each key from the strongest source that sets it, and says which', () => {
    const config = file('gateway.yaml', 'port: 9000\nhost: 0.0.0.0\nlimits:\n  helloTimeoutMs: 5000\n  promptExpiryMs: 60000\n');
    const env = { TETHER_PORT: '9100', TETHER_LIMITS_PROMPT_EXPIRY_MS: '30000', TETHER_STATE_DIR: dir.path };

    const all = loadGateway({ flags: { config, port: '9200' }, env });
    expect(all.config).toMatchObject({
      port: 9200,
      host: '0.0.0.0',
      stateDir: dir.path,
      limits: { helloTimeoutMs: 5000, promptExpiryMs: 30000 },
    });
    expect(all.sources).toEqual({
      port: '--port',
      host: config,
      'limits.helloTimeoutMs': config,
      'limits.promptExpiryMs': 'TETHER_LIMITS_PROMPT_EXPIRY_MS',
      stateDir: 'TETHER_STATE_DIR',
    });
    expect(loadGateway({ flags: { config }, env }).config.port).toBe(9100);
    expect(loadGateway({ flags: { config } }).config.port).toBe(9000);
    expect(loadGateway({ env: { TETHER_CONFIG: config } }).config.port).toBe(9000);
    expect(loadGateway({}).config.port).toBe(7800);
  });

  it('fills every default from named constants, and derives what depends on other keys', () => {
    const c = loadGateway({ flags: { 'state-dir': dir.path } }).config;
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 7800,
      grpcPort: 7801,
      auth: 'on',
      allowOrigins: [],
      metrics: true,
      logLevel: 'info',
      logFormat: 'auto',
    });
    expect(c.auditLog).toBe(join(dir.path, 'audit.jsonl'));
    expect(gatewayLimitsOf(c.limits)).toEqual(GATEWAY_DEFAULTS);
    expect(loadGateway({ flags: { port: '0' } }).config.grpcPort).toBe(0); // free ports for both
    expect(loadGateway({ flags: { port: '0', 'grpc-port': '7900' } }).config.grpcPort).toBe(7900);
    expect(loadGateway({ env: { TETHER_GRPC_PORT: 'off' } }).config.grpcPort).toBeNull();
    expect(loadGateway({ flags: { 'state-dir': 'relative/state' } }).config.stateDir).toBe(resolve('relative/state'));
    expect(loadConfig(UP_CONFIG, { env: {} }).config.logLevel).toBe('warn');
  });

  it('reads lists and maps from repeated flags or comma-separated variables, JSON files too', () => {
    expect(loadGateway({ env: { TETHER_ALLOW_ORIGINS: 'https://a.example, http://b.example:8080' } }).config.allowOrigins).toEqual([
      'https://a.example',
      'http://b.example:8080',
    ]);
    expect(loadGateway({ flags: { 'allow-origin': ['https://c.example'] } }).config.allowOrigins).toEqual(['https://c.example']);
    const agent = (inputs: ConfigInputs) =>
      loadConfig(AGENT_CONFIG, { ...inputs, env: { TETHER_GATEWAY: 'ws://gw:7800', ...inputs.env } }).config;
    expect(agent({ env: { TETHER_LABELS: 'team=infra,os=linux' } }).labels).toEqual({ team: 'infra', os: 'linux' });
    expect(agent({ flags: { label: ['team=web', 'gpu=yes'] } }).labels).toEqual({ team: 'web', gpu: 'yes' });
    expect(agent({ env: { TETHER_AGENT: 'buildbox' } }).name).toBe('buildbox');
    const json = file('agent.json', JSON.stringify({ gateway: 'grpcs://gw.example:7801', engine: 'demo', heartbeatIntervalMs: 5000 }));
    expect(loadConfig(AGENT_CONFIG, { flags: { config: json }, env: {} }).config).toMatchObject({
      gateway: 'grpcs://gw.example:7801',
      engine: ['demo'], // a list since an agent may offer several engines (issue 37); a file's string is read as one
      heartbeatIntervalMs: 5000,
    });
  });

  it('reads the agent token from a file, and masks it when printed', () => {
    const tokenFile = file('agent.token', 'eyJ.secret.token\n');
    const loaded = loadConfig(AGENT_CONFIG, { flags: { gateway: 'ws://gw:7800', 'token-file': tokenFile }, env: {} });
    expect(loaded.config.token).toBe('eyJ.secret.token');
    const printed = renderConfig(loaded);
    expect(printed).not.toContain('eyJ.secret.token');
    expect(parseYaml(printed)).toMatchObject({ gateway: 'ws://gw:7800', token: '[redacted]', tokenFile });
    expect(printed).toContain('gateway: ws://gw:7800 # --gateway\n');
    expect(
      JSON.parse(renderConfig(loadConfig(AGENT_CONFIG, { flags: { gateway: 'ws://gw:7800', token: 'abc' }, env: {} }), { json: true }))
        .token,
    ).toBe('[redacted]');
  });

  it('documents every key: help text, and a flag or variable name', () => {
    for (const spec of [GATEWAY_CONFIG, AGENT_CONFIG, UP_CONFIG]) {
      for (const k of keysOf(spec.schema)) {
        expect(k.help.length, k.name).toBeGreaterThan(10);
        expect(k.env, k.name).toMatch(/^TETHER_[A-Z0-9_]+$/);
      }
    }
  });
});

describe('configuration errors: every problem at once, with its key and source', () => {
  it('unknown keys, bad types and a missing key file, in one report', () => {
    const config = file(
      'gateway.yaml',
      ['prot: 9000', 'grpcPort: "7801"', 'keyFile: /nonexistent/key.json', 'limits:', '  helloTimeoutMs: -5', '  maxClients: 3', ''].join(
        '\n',
      ),
    );
    const problems = problemsOf(() => loadGateway({ flags: { config, 'log-level': 'loud' }, env: { TETHER_PORT: 'abc' } }));
    expect(problems).toEqual([
      'port (from TETHER_PORT): expected a number, got "abc"',
      `grpcPort (from ${config}): expected a number, got "7801"`,
      `keyFile (from ${config}): cannot read key file /nonexistent/key.json: ENOENT: no such file or directory, stat '/nonexistent/key.json'`,
      'logLevel (from --log-level): must be one of trace, debug, info, warn, error, fatal, silent; got "loud"',
      `limits.helloTimeoutMs (from ${config}): must be more than 0, got -5`,
      `limits.maxClients (from ${config}): unknown key`,
      `prot (from ${config}): unknown key (did you mean "port"?)`,
    ]);
  });

  it('a key file that is not a key, ranges, origins and URLs', () => {
    const notKey = file('key.json', '{"kty":"oct","k":"c2hvcnQ"}');
    expect(
      problemsOf(() =>
        loadGateway({
          flags: { key: notKey, port: '70000', 'allow-origin': ['https://ok.example', 'http://x.example/path'], 'jwks-url': 'ftp://idp' },
        }),
      ),
    ).toEqual([
      'port (from --port): must be at most 65535, got 70000',
      `keyFile (from --key): ${notKey}: an HS256 secret needs at least 32 bytes, this one has 5`,
      'jwksUrl (from --jwks-url): must be an http(s) URL, got "ftp://idp"',
      'allowOrigins.1 (from --allow-origin): must be an origin like https://app.example.com[:port] (no path), got "http://x.example/path"',
    ]);
  });

  it('config files that cannot be used', () => {
    expect(problemsOf(() => loadGateway({ flags: { config: join(dir.path, 'missing.yaml') } }))).toEqual([
      `config file ${join(dir.path, 'missing.yaml')}: cannot read it (ENOENT)`,
    ]);
    const list = file('list.yaml', '- port: 1\n');
    expect(problemsOf(() => loadGateway({ flags: { config: list } }))).toEqual([
      `config file ${list}: must hold a mapping of keys to values`,
    ]);
    const badYaml = file('bad.yaml', 'port: [1\n');
    expect(problemsOf(() => loadGateway({ flags: { config: badYaml } }))[0]).toMatch(
      new RegExp(`^config file ${badYaml}: not valid YAML \\(`),
    );
    const badJson = file('bad.json', '{"port": 1,');
    expect(problemsOf(() => loadGateway({ flags: { config: badJson } }))[0]).toMatch(
      new RegExp(`^config file ${badJson}: not valid JSON \\(`),
    );
    expect(loadGateway({ flags: { config: file('empty.yaml', '') } }).config.port).toBe(7800);
  });

  it('agent: a missing gateway, a bad URL, a bad label, an unreadable or doubled token', () => {
    const agent = (inputs: ConfigInputs) => problemsOf(() => loadConfig(AGENT_CONFIG, { env: {}, ...inputs }));
    expect(agent({})).toEqual(['gateway: missing: set --gateway, TETHER_GATEWAY or "gateway" in the config file']);
    expect(agent({ flags: { gateway: 'http://gw:7800', label: ['nope'] }, env: { TETHER_AGENT: 'bad name' } })).toEqual([
      'labels (from --label): must be KEY=VALUE, got "nope"',
      'gateway (from --gateway): must be a ws://, wss://, grpc:// or grpcs:// URL, got "http://gw:7800"',
      'name (from TETHER_AGENT): letters, digits, dot, dash and underscore only',
    ]);
    const missing = join(dir.path, 'no.token');
    expect(agent({ flags: { gateway: 'ws://gw:7800', 'token-file': missing } })).toEqual([
      `tokenFile (from --token-file): cannot read ${missing}: ENOENT`,
    ]);
    expect(agent({ flags: { gateway: 'ws://gw:7800', 'token-file': file('t', 'x') }, env: { TETHER_TOKEN: 'y' } })).toEqual([
      'tokenFile (from --token-file): use a token or a token file, not both (token is set by TETHER_TOKEN)',
    ]);
  });

  it('gateway: --key and --state-dir on one command line are refused as before', () => {
    const key = join(dir.path, 'k.json');
    writeKeyFile(key, generateTokenKey('HS256').privateJwk);
    expect(problemsOf(() => loadGateway({ flags: { key, 'state-dir': dir.path } }))).toEqual([
      'keyFile (from --key): use --key or --state-dir, not both',
    ]);
    expect(loadGateway({ flags: { key }, env: { TETHER_STATE_DIR: dir.path } }).config).toMatchObject({ keyFile: key, stateDir: dir.path });
  });

  it('up: a public key cannot mint tokens', () => {
    const pub = join(dir.path, 'pub.json');
    writeFileSync(pub, JSON.stringify(generateTokenKey('EdDSA').publicJwk));
    expect(problemsOf(() => loadConfig(UP_CONFIG, { flags: { key: pub }, env: {} }))).toEqual([
      `keyFile (from --key): ${pub} holds a public key: tether up mints tokens and needs the private key or secret`,
    ]);
  });
});

describe('the CLI refuses a bad configuration before opening anything', () => {
  let held: Server | undefined;
  afterEach(() => held?.close());

  it('tether gateway exits 2 with every problem; the port was never tried, no key was created', async () => {
    held = createServer();
    await new Promise<void>((r) => held!.listen(0, '127.0.0.1', r));
    const port = (held.address() as { port: number }).port;
    const config = file('gw.yaml', 'limits:\n  slowClientByte: 1\n');
    const state = join(dir.path, 'state');
    const r = await runTether(['gateway', '--config', config, '--port', String(port), '--state-dir', state, '--auth', 'maybe'], {
      env: { TETHER_LOG_LEVEL: '' },
    });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'tether: invalid configuration for tether gateway (2 problems):\n' +
        '  auth (from --auth): must be one of on, off; got "maybe"\n' +
        `  limits.slowClientByte (from ${config}): unknown key (did you mean "slowClientBytes"?)\n`,
    );
    expect(existsSync(state)).toBe(false); // the key would have been created before listening
  });

  it('tether agent and tether up exit 2 the same way', async () => {
    const agent = await runTether(['agent', '--gateway', 'ws://127.0.0.1:1', '--engine', 'gpt'], { env: { TETHER_GATEWAY: '' } });
    expect(agent.code).toBe(2);
    expect(agent.stderr).toBe(
      'tether: invalid configuration for tether agent (1 problem):\n  engine.0 (from --engine): must be one of auto, claude, demo, acp, opencode, gemini, codex, claude-acp; got "gpt"\n',
    );
    const up = await runTether(['up', '--port', 'x', '--state-dir', join(dir.path, 'up')]);
    expect(up.code).toBe(2);
    expect(up.stderr).toBe('tether: invalid configuration for tether up (1 problem):\n  port (from --port): expected a number, got "x"\n');
    expect(existsSync(join(dir.path, 'up'))).toBe(false);
  });

  it('tether config --print shows the effective configuration, secrets masked', async () => {
    const config = file('agent.yaml', 'gateway: wss://gw.example:7800\nlabels:\n  team: infra\n');
    const r = await runTether(['config', '--print', '--program', 'agent', '--config', config, '--name', 'box-1'], {
      env: { TETHER_TOKEN: 'eyJ.very.secret', TETHER_GATEWAY: '', TETHER_AGENT: '' },
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain('very.secret');
    expect(r.stdout).toContain(`# effective configuration of tether agent (config file ${config}); secrets masked`);
    expect(r.stdout).toContain('name: box-1 # --name\n');
    expect(r.stdout).toContain('token: "[redacted]" # TETHER_TOKEN\n');
    expect(parseYaml(r.stdout)).toMatchObject({
      gateway: 'wss://gw.example:7800',
      name: 'box-1',
      labels: { team: 'infra' },
      engine: ['auto'],
      heartbeatIntervalMs: 15000,
    });

    const foreign = await runTether(['config', '--print', '--program', 'gateway', '--name', 'x']);
    expect(foreign.code).toBe(2);
    expect(foreign.stderr).toBe('tether: --name: not an option of tether gateway\n');
    const keys = await runTether(['config', '--keys', '--program', 'up']);
    expect(keys.stdout).toContain('limits.promptExpiryMs = 600000   (TETHER_LIMITS_PROMPT_EXPIRY_MS)');
    expect(keys.stdout).toContain('port = 7800   (--port, TETHER_PORT)');
  });
});

describe('notification keys (tether gateway, tether up)', () => {
  it('--webhook (repeatable) with --webhook-secret-file, and webhooks entries from the file; printed masked', () => {
    const secret = join(dir.path, 'hook.secret');
    writeFileSync(secret, 'the-webhook-secret\n');
    const slackSecret = join(dir.path, 'slack.secret');
    writeFileSync(slackSecret, 's3');
    const file = join(dir.path, 'gateway.json');
    writeFileSync(
      file,
      JSON.stringify({
        webhooks: [{ url: 'https://hooks.slack.test/services/T/B/xyz', secretFile: slackSecret, format: 'slack', events: ['question'] }],
      }),
    );
    for (const spec of [GATEWAY_CONFIG, UP_CONFIG]) {
      const loaded = loadConfig(spec as typeof GATEWAY_CONFIG, {
        env: {},
        flags: {
          config: file,
          webhook: ['https://a.test/one', 'http://10.0.0.5/two'],
          'webhook-secret-file': secret,
          'state-dir': dir.path,
        },
      });
      expect(operatorWebhooks(loaded.config)).toEqual([
        { url: 'https://a.test/one', secret: 'the-webhook-secret', format: 'json' },
        { url: 'http://10.0.0.5/two', secret: 'the-webhook-secret', format: 'json' },
        { url: 'https://hooks.slack.test/services/T/B/xyz', secret: 's3', events: ['question'], format: 'slack' },
      ]);
      const printed = renderConfig(loaded);
      expect(printed).not.toContain('hooks.slack.test');
      expect(printed).not.toContain('a.test/one');
      expect(printed).not.toContain('the-webhook-secret');
      expect(printed).toContain(MASK);
    }
  });

  it('refuses a webhook that is not http(s) and a VAPID subject that is neither mailto: nor https, all at once', () => {
    const problems = problemsOf(() =>
      loadConfig(GATEWAY_CONFIG, {
        env: {},
        flags: { webhook: ['ftp://x.test/'], 'vapid-subject': 'someone' },
      }),
    );
    expect(problems.join('\n')).toMatch(/webhook.*must be an http\(s\) URL/);
    expect(problems.join('\n')).toMatch(/vapidSubject.*mailto/);
  });
});
