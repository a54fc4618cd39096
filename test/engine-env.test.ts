import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { engineEnvironment, resolveEngineUser } from '../agent/engine-env.js';
import type { GatewayClient } from '../client/gateway-client.js';
import { thrownBy } from './support/thrown.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { startTether, type Daemon } from './support/cli.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { startStack, withTimeout, type Stack } from './support/stack.js';
import { othersCanRun, runnableByOthers } from './support/other-user-path.js';
import { readTurn } from './support/turns.js';
import { waitFor } from './support/wait.js';

/** Issue 13, finding 5: what an engine's environment holds, and whose user it runs as. */
const TOKEN = 'eyJhbGciOiJIUzI1NiJ9.the-agent-token-itself.signature';

describe('engineEnvironment', () => {
  it('drops TETHER_* and anything carrying the token, adds and withholds what the owner says', () => {
    const base = {
      PATH: '/bin',
      HOME: '/home/a',
      TETHER_TOKEN: TOKEN,
      TETHER_GATEWAY: 'ws://g',
      tether_agent: 'x',
      COPY: TOKEN,
      BEARER: `Bearer ${TOKEN}`,
      AWS_SECRET_ACCESS_KEY: 's',
      AWS_REGION: 'r',
      KEEP: 'k',
    };
    const env = engineEnvironment(
      { CLAUDE_CODE_SDK_READS_SESSION_STATE: '1' },
      { secrets: [TOKEN, undefined], deny: ['AWS_*', 'KE?P'], set: { ADDED: 'yes' } },
      base,
    );
    expect(env).toEqual({ PATH: '/bin', HOME: '/home/a', CLAUDE_CODE_SDK_READS_SESSION_STATE: '1', ADDED: 'yes' });
  });

  it("gives the engine user's HOME, USER and LOGNAME; the agent's own extras still win", () => {
    const user = { name: 'builder', uid: 1234, gid: 1234, home: '/home/builder' };
    expect(engineEnvironment({}, { user }, { HOME: '/root', USER: 'root' })).toEqual({
      HOME: '/home/builder',
      USER: 'builder',
      LOGNAME: 'builder',
    });
    expect(engineEnvironment({ HOME: '/tmp/h' }, { user }, {}).HOME).toBe('/tmp/h');
  });

  it('--engine-user: a clear FAILED_PRECONDITION when the agent may not switch users or the user is unknown', () => {
    const passwd = [{ name: 'nobody', uid: 65534, gid: 65534, home: '/nonexistent' }];
    const notRoot = thrownBy(() => resolveEngineUser('nobody', passwd, 1000, false))!;
    expect(notRoot.code).toBe('FAILED_PRECONDITION');
    expect(notRoot.message).toContain('the agent runs as uid 1000 without CAP_SETUID and CAP_SETGID and may not switch users');
    expect(thrownBy(() => resolveEngineUser('ghost', passwd, 0))!.message).toContain('"ghost" is not in /etc/passwd');
    expect(resolveEngineUser('nobody', passwd, 0)).toEqual(passwd[0]);
    expect(resolveEngineUser('nobody', passwd, 1000, true)).toEqual(passwd[0]); // CAP_SETUID and CAP_SETGID
    expect(resolveEngineUser('4242:17', passwd, 0)).toMatchObject({ uid: 4242, gid: 17 });
  });
});

/**
 * `tether agent` as its own process, with its token in TETHER_TOKEN (as the README tells
 * users to run it) and a copy in another variable; the real CLI's Bash tool, driven by the
 * scripted model, prints the engine's environment and user.
 */
describe('an engine started by `tether agent`', () => {
  let stack: Stack | undefined;
  let fake: FakeAnthropic | undefined;
  let agent: Daemon | undefined;
  const dirs: TempDir[] = [];
  afterEach(async () => {
    await agent?.stop('SIGTERM', 15_000);
    await stack?.stop();
    await fake?.close();
    for (const d of dirs.splice(0)) d.cleanup();
    agent = stack = fake = undefined;
  });

  /** Starts the stack, then the agent process with `flags`; runs `command` in Bash; returns its output. */
  async function bashOnAgent(
    command: string,
    flags: (home: string) => string[],
    engineCommand = claudeBinaryPath(),
  ): Promise<{ text: string; token: string }> {
    fake = await startFakeAnthropic({
      responses: [
        { text: 'Looking.', tool_use: { id: 'toolu_env', name: 'Bash', input: { command, description: 'look around' } } },
        { text: 'Done.' },
      ],
    });
    stack = await startStack({ engine: 'demo' });
    const token = await stack.mint({ kind: 'agent', sub: 'envbox' });
    const home = makeTempDir('tether-env-home-');
    const cwd = makeTempDir('tether-env-cwd-');
    dirs.push(home, cwd);
    chmodSync(home.path, 0o777);
    chmodSync(cwd.path, 0o777);
    agent = startTether(
      [
        'agent',
        '--gateway',
        stack.grpcUrl,
        '--name',
        'envbox',
        '--engine',
        'claude',
        '--engine-command',
        engineCommand,
        '--cwd',
        cwd.path,
        ...flags(home.path),
      ],
      {
        env: {
          ...claudeTestEnv({ home: home.path, baseUrl: fake.url }),
          TETHER_TOKEN: token,
          TETHER_LOG_LEVEL: 'warn',
          A_COPY_OF_THE_TOKEN: token,
          AWS_SECRET_ACCESS_KEY: 'not-for-engines',
        },
      },
    );
    const client = await stack.client();
    await waitForAgent(client, 'envbox');
    const session = await client.createSession({ agent: 'envbox' });
    await session.sendUserMessage('Show me the environment');
    const turn = await withTimeout(
      readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input })),
      60_000,
      'the Bash turn',
    );
    expect(turn.result.is_error).toBe(false);
    const out = fake.lastToolResults().find((r) => r.tool_use_id === 'toolu_env');
    expect(out?.is_error).toBeFalsy();
    return { text: out!.content, token };
  }

  it('sees no TETHER_* variable and no copy of the agent token', async () => {
    const { text, token } = await bashOnAgent('env', () => []);
    expect(text).toMatch(/^PATH=/m); // the real environment came through
    expect(text).toContain('AWS_SECRET_ACCESS_KEY=not-for-engines'); // withheld only when the owner says so
    expect(text).not.toContain(token);
    expect(text).not.toMatch(/^TETHER_/m);
  }, 90_000);

  it('--engine-env adds a variable, --engine-env-deny withholds one', async () => {
    const { text } = await bashOnAgent('env', () => ['--engine-env', 'FOR_ENGINE=yes', '--engine-env-deny', 'AWS_*']);
    expect(text).toContain('FOR_ENGINE=yes');
    expect(text).not.toContain('AWS_SECRET_ACCESS_KEY');
  }, 90_000);

  it.skipIf(process.getuid?.() !== 0)(
    '--engine-user runs the engine as that user',
    async () => {
      // A clone in a private folder (root's home is 0700) keeps nobody out of node_modules: the
      // engine binary is then run from a link nobody can reach (test/support/other-user-path.ts).
      const engine = runnableByOthers(claudeBinaryPath());
      if (engine.folder) dirs.push(engine.folder);
      // nobody's own HOME (/nonexistent) cannot hold the CLI's state: the owner gives it one.
      const { text } = await bashOnAgent(
        'id -u; echo "home=$HOME"',
        (home) => ['--engine-user', 'nobody', '--engine-env', `HOME=${home}`],
        engine.path,
      );
      expect(text).toMatch(/^65534$/m);
      expect(text).toMatch(/^home=\/tmp\//m);
    },
    90_000,
  );
});

describe.skipIf(process.getuid?.() !== 0)('an engine binary in a private folder (a clone under /root)', () => {
  const dirs: TempDir[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) d.cleanup();
  });

  it('nobody cannot run it there, and can run what runnableByOthers gives', () => {
    const clone = makeTempDir('tether-private-clone-');
    dirs.push(clone);
    chmodSync(clone.path, 0o700); // as /root is
    mkdirSync(join(clone.path, 'bin'));
    const program = join(clone.path, 'bin', 'true');
    copyFileSync('/bin/true', program);
    chmodSync(program, 0o755);
    const asNobody = (path: string) => spawnSync(path, [], { uid: 65534, gid: 65534, timeout: 10_000 });
    expect(othersCanRun(program)).toBe(false);
    expect(asNobody(program).error?.message).toMatch(/EACCES/);
    const runnable = runnableByOthers(program);
    if (runnable.folder) dirs.push(runnable.folder);
    expect(runnable.path).not.toBe(program);
    expect(othersCanRun(runnable.path)).toBe(true);
    expect(asNobody(runnable.path).status).toBe(0);
    expect(runnableByOthers('/bin/true')).toEqual({ path: '/bin/true' }); // already reachable: used as it is
  });
});

/** Waits until the gateway lists the agent (bounded). */
async function waitForAgent(client: GatewayClient, name: string): Promise<void> {
  await waitFor(async () => (await client.listAgents()).some((a) => a.name === name), 20_000, `agent ${name} to register`);
}
