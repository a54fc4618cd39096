import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { processesIn, runTether, startTether, type Daemon } from './support/cli.js';

/** `tether up` as a user runs it: a child process, a `tether run` against it, then SIGTERM. */
describe('tether up', () => {
  let up: Daemon | undefined;
  let dir: TempDir | undefined;
  let state: TempDir | undefined;
  afterEach(async () => {
    await up?.stop('SIGKILL');
    dir?.cleanup();
    state?.cleanup();
    up = undefined;
  });

  /** Starts `tether up` with a fresh state folder; resolves with its URLs and client token. */
  async function startUp(): Promise<{ url: string; grpcUrl: string; env: NodeJS.ProcessEnv }> {
    dir = makeTempDir('tether-up-');
    state = makeTempDir('tether-state-');
    up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', dir.path, '--state-dir', state.path]);
    const url = (await up.line('gateway: ')).slice('gateway: '.length);
    const grpcUrl = (await up.line('grpc: ')).slice('grpc: '.length);
    const token = (await up.line('token: ')).slice('token: '.length);
    return { url, grpcUrl, env: { TETHER_TOKEN: token } };
  }

  it('serves tether run, and SIGTERM leaves no engine behind', async () => {
    const { url, grpcUrl, env } = await startUp();
    expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    expect(env.TETHER_TOKEN).toMatch(/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(grpcUrl).toMatch(/^grpc:\/\/127\.0\.0\.1:\d+$/);
    expect(statSync(join(state!.path, 'gateway-key.json')).mode & 0o777).toBe(0o600);

    const noToken = await runTether(['run', '--gateway', url, '--agent', 'local', 'hello there'], { env: { TETHER_TOKEN: '' } });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toContain('no token');

    const hello = await runTether(['run', '--gateway', url, '--agent', 'local', 'hello there'], { env });
    expect(hello.stderr).toBe('');
    expect(hello.code).toBe(0);
    expect(hello.stdout).toContain('You said: hello there');

    const overGrpc = await runTether(['run', '--gateway', grpcUrl, '--agent', 'local', 'hello over grpc'], { env });
    expect(overGrpc.code).toBe(0);
    expect(overGrpc.stdout).toContain('You said: hello over grpc');

    const write = await runTether(['run', '--gateway', url, '--agent', 'local', '--allow', 'Bash', 'create a file'], { env });
    expect(write.code).toBe(0);
    expect(existsSync(join(dir!.path, 'tether-demo.txt'))).toBe(true);

    // A token minted by `tether token` with the same state folder works too.
    const minted = await runTether([
      'token',
      '--state-dir',
      state!.path,
      '--role',
      'client',
      '--sub',
      'ci-bot',
      '--scope',
      'view',
      '--ttl',
      '5m',
    ]);
    expect(minted.code).toBe(0);
    const agents = await runTether(['agents', '--gateway', url, '--json'], { env: { TETHER_TOKEN: minted.stdout.trim() } });
    expect(JSON.parse(agents.stdout).map((a: { name: string }) => a.name)).toEqual(['local']);

    // Leave a session running (its engine is a live process), then stop `up`.
    const client = await GatewayClient.connect({ gateway: url, token: env.TETHER_TOKEN, reconnect: false });
    const session = await client.createSession({ agent: 'local' });
    await session.sendUserMessage('a slow long answer please');
    expect(processesIn(dir!.path, 'demo-engine/main.js').length).toBe(1);
    const exit = await up!.stop('SIGTERM');
    await client.close();
    expect(exit.code).toBe(0);
    expect(processesIn(dir!.path, 'demo-engine/main.js')).toEqual([]);
  });

  it('a denied tool makes tether run say so, and an unknown agent is a clear error', async () => {
    const { url, env } = await startUp();
    const denied = await runTether(['run', '--gateway', url, '--agent', 'local', 'create a file'], { env });
    expect(denied.stderr).toContain('Bash was not allowed');
    expect(existsSync(join(dir!.path, 'tether-demo.txt'))).toBe(false);

    const missing = await runTether(['run', '--gateway', url, '--agent', 'nope', 'hi'], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no agent named "nope"');

    const json = await runTether(['sessions', '--gateway', url, '--json'], { env });
    const sessions = JSON.parse(json.stdout) as {
      id: string;
      agent: string;
      owner: string;
      state: string;
      clients: unknown[];
      pending_prompts: number;
    }[];
    expect(sessions.length).toBe(1);
    expect(sessions[0]).toMatchObject({ agent: 'local', pending_prompts: 0 });
    expect(sessions[0].owner).not.toBe('anonymous');
  });

  it('bad command lines fail with usage errors and --help works everywhere', async () => {
    const bad = await runTether(['run', '--bogus']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("Unknown option '--bogus'");
    const noGateway = await runTether(['agents'], { env: { TETHER_GATEWAY: '' } });
    expect(noGateway.code).toBe(2);
    expect(noGateway.stderr).toContain('missing --gateway');
    const refused = await runTether(['agents', '--gateway', 'ws://127.0.0.1:1']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('cannot connect to ws://127.0.0.1:1');
    const scheme = await runTether(['agents', '--gateway', 'http://127.0.0.1:1']);
    expect(scheme.stderr).toContain('unsupported gateway URL scheme');
    // Every command the top-level help lists loads (each is imported only when it runs) under its own name.
    const top = await runTether(['--help']);
    const listed = [...top.stdout.matchAll(/^ {2}([a-z-]+) {2,}/gm)].map((m) => m[1]);
    expect(listed).toEqual(
      expect.arrayContaining(['up', 'gateway', 'agent', 'run', 'agents', 'sessions', 'token', 'keygen', 'audit', 'acp']),
    );
    const helps = await Promise.all(listed.map((cmd) => runTether([cmd, '--help'])));
    helps.forEach((help, n) => {
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`Usage: tether ${listed[n]}`);
    });
  });
});
