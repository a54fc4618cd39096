import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { processesIn, runTether, startTether, type Daemon } from './support/cli.js';

/** `tether up` as a user runs it: a child process, a `tether run` against it, then SIGTERM. */
describe('tether up', () => {
  let up: Daemon | undefined;
  let dir: TempDir | undefined;
  afterEach(async () => {
    await up?.stop('SIGKILL');
    dir?.cleanup();
    up = undefined;
  });

  it('serves tether run, and SIGTERM leaves no engine behind', async () => {
    dir = makeTempDir('tether-up-');
    up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', dir.path]);
    const url = (await up.line('gateway: ')).slice('gateway: '.length);
    expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    expect(await up.line('token: ')).toMatch(/^token: /);
    const grpcUrl = (await up.line('grpc: ')).slice('grpc: '.length);
    expect(grpcUrl).toMatch(/^grpc:\/\/127\.0\.0\.1:\d+$/);

    const hello = await runTether(['run', '--gateway', url, '--agent', 'local', 'hello there']);
    expect(hello.stderr).toBe('');
    expect(hello.code).toBe(0);
    expect(hello.stdout).toContain('You said: hello there');

    const overGrpc = await runTether(['run', '--gateway', grpcUrl, '--agent', 'local', 'hello over grpc']);
    expect(overGrpc.code).toBe(0);
    expect(overGrpc.stdout).toContain('You said: hello over grpc');

    const write = await runTether(['run', '--gateway', url, '--agent', 'local', '--allow', 'Bash', 'create a file']);
    expect(write.code).toBe(0);
    expect(existsSync(join(dir.path, 'tether-demo.txt'))).toBe(true);

    // Leave a session running (its engine is a live process), then stop `up`.
    const client = await GatewayClient.connect({ gateway: url, reconnect: false });
    const session = await client.createSession({ agent: 'local' });
    await session.sendUserMessage('a slow long answer please');
    expect(processesIn(dir.path, 'demo-engine.js').length).toBe(1);
    const exit = await up.stop('SIGTERM');
    await client.close();
    expect(exit.code).toBe(0);
    expect(processesIn(dir.path, 'demo-engine.js')).toEqual([]);
  });

  it('a denied tool makes tether run say so, and an unknown agent is a clear error', async () => {
    dir = makeTempDir('tether-up-');
    up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', dir.path]);
    const url = (await up.line('gateway: ')).slice('gateway: '.length);
    const denied = await runTether(['run', '--gateway', url, '--agent', 'local', 'create a file']);
    expect(denied.stderr).toContain('Bash was not allowed');
    expect(existsSync(join(dir.path, 'tether-demo.txt'))).toBe(false);

    const missing = await runTether(['run', '--gateway', url, '--agent', 'nope', 'hi']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no agent named "nope"');

    const json = await runTether(['sessions', '--gateway', url, '--json']);
    const sessions = JSON.parse(json.stdout) as { id: string; agent: string; owner: string; state: string; clients: unknown[]; pending_prompts: number }[];
    expect(sessions.length).toBe(1);
    expect(sessions[0]).toMatchObject({ agent: 'local', owner: 'anonymous', pending_prompts: 0 });
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
    for (const cmd of ['up', 'gateway', 'agent', 'run', 'agents', 'sessions']) {
      const help = await runTether([cmd, '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`Usage: tether ${cmd}`);
    }
  });
});
