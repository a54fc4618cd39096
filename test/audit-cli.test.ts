import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import { asPermissionRequest } from '../client/permission-policy.js';
import { runTether, startTether, TETHER_BIN, type Daemon } from './support/cli.js';
import { isCanUseTool, isResult, until } from './support/items.js';
import { cleanupsPerTest } from './support/cleanups.js';

/** JSON lines printed by `tether audit --json`, each parsed (a non-JSON line fails the test). */
const lines = (out: string) =>
  out
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

/** `tether audit` as an operator uses it: against a gateway, after a restart, and offline while it is down. */
describe('tether audit', () => {
  const cleanups = cleanupsPerTest();
  const temp = (prefix: string) => cleanups.tempDir(prefix);
  async function up(state: string, cwd: string): Promise<{ daemon: Daemon; url: string; token: string }> {
    const daemon = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', cwd, '--state-dir', state]);
    cleanups.push(() => daemon.stop('SIGKILL'));
    const url = (await daemon.line('gateway: ')).slice('gateway: '.length);
    const token = (await daemon.line('token: ')).slice('token: '.length);
    return { daemon, url, token };
  }

  it('reads the trail back after a gateway restart (table, --json, every filter) and offline while the gateway is down', async () => {
    const state = temp('tether-state-');
    const cwd = temp('tether-cwd-');
    chmodSync(state.path, 0o755); // an existing folder others can read: tightened at start
    const first = await up(state.path, cwd.path);
    expect(statSync(state.path).mode & 0o777).toBe(0o700);
    expect(statSync(join(state.path, 'audit.jsonl')).mode & 0o777).toBe(0o600);

    const client = await GatewayClient.connect({ gateway: first.url, token: first.token, reconnect: false });
    const systemPrompt = 'Be brief. '.repeat(300);
    const s = await client.createSession({ agent: 'local', options: { model: 'demo-model', system_prompt: systemPrompt } });
    const items = s[Symbol.asyncIterator]();
    for (const behavior of ['allow', 'deny'] as const) {
      await s.sendUserMessage('create a file');
      const ask = asPermissionRequest(((await until(items, isCanUseTool)) as { message: Record<string, unknown> }).message)!;
      await s.answer(ask.requestId, behavior === 'allow' ? { behavior, updatedInput: ask.input } : { behavior, message: 'no' });
      await until(items, isResult);
    }
    await s.stop();
    await client.close();
    expect((await first.daemon.stop('SIGTERM')).code).toBe(0);

    // Offline, the gateway down: the file itself, read by the state folder.
    const offline = await runTether(['audit', '--state-dir', state.path, '--json']);
    expect(offline.stderr).toBe('');
    expect(offline.code).toBe(0);
    const all = lines(offline.stdout);
    const owner = all[0].principal as string;
    expect(all.filter((e) => e.session_id === s.id).map((e) => e.action)).toEqual([
      'create',
      'attach',
      'prompt',
      'permission_decision',
      'prompt',
      'permission_decision',
      'stop',
      'ended',
      'detach',
    ]);

    // On a terminal the default is a table (script(1) gives the command a pseudo-terminal).
    if (existsSync('/usr/bin/script')) {
      const tty = execFileSync(
        '/usr/bin/script',
        ['-qc', `${process.execPath} ${TETHER_BIN} audit --state-dir ${state.path} --action create`, '/dev/null'],
        { timeout: 15_000 },
      ).toString();
      expect(tty.split(/\r?\n/)[0]).toMatch(/^TIME\s+SESSION\s+PRINCIPAL\s+ACTION\s+TURN\s+DETAILS$/);
      expect(tty).toMatch(new RegExp(`${s.id}\\s+${owner}\\s+create\\s+-\\s+agent=local engine=demo options=`));
    }

    const second = await up(state.path, cwd.path);
    const env = { TETHER_GATEWAY: second.url, TETHER_TOKEN: second.token };
    const admin = await runTether([
      'token',
      '--state-dir',
      state.path,
      '--role',
      'client',
      '--sub',
      'auditor',
      '--scope',
      'admin',
      '--ttl',
      '5m',
    ]);
    const adminEnv = { TETHER_GATEWAY: second.url, TETHER_TOKEN: admin.stdout.trim() };

    // The owner reads its session (SESSION, JSON lines when stdout is not a terminal).
    const mine = await runTether(['audit', s.id], { env });
    expect(mine.code).toBe(0);
    expect(lines(mine.stdout)).toEqual(all.filter((e) => e.session_id === s.id));
    const [create] = lines(mine.stdout);
    expect(create).toMatchObject({ action: 'create', principal: owner, agent: 'local', engine: 'demo', options: { model: 'demo-model' } });
    expect(create.options.system_prompt).toHaveLength(1024);
    expect(create.cut['options.system_prompt'].chars).toBe(systemPrompt.length);

    const table = await runTether(['audit', '--session', s.id, '--table'], { env });
    const rows = table.stdout.trimEnd().split('\n');
    expect(rows[0]).toMatch(/^TIME\s+SESSION\s+PRINCIPAL\s+ACTION\s+TURN\s+DETAILS$/);
    expect(rows).toHaveLength(1 + 9);
    // TURN: whose prompt the decided call came from.
    expect(rows[4]).toMatch(new RegExp(`${s.id}\\s+${owner}\\s+permission_decision\\s+${owner}\\s+.*behavior=allow`));

    const denied = await runTether(['audit', '--action', 'create'], { env });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('needs the admin scope');

    const q = async (...args: string[]) => lines((await runTether(['audit', '--json', ...args], { env: adminEnv })).stdout);
    const [byOwner, byNobody, decisions, denials, newest, bad] = await Promise.all([
      q('--principal', owner),
      q('--principal', 'nobody'),
      q('--action', 'permission_decision'),
      q('--decision', 'deny'),
      q('--session', s.id, '--limit', '2'),
      runTether(['audit', '--action', 'launch'], { env: adminEnv }),
    ]);
    expect(byOwner.map((e) => e.action)).toEqual([
      'create',
      'attach',
      'prompt',
      'permission_decision',
      'prompt',
      'permission_decision',
      'stop',
      'detach',
    ]);
    expect(byOwner.every((e) => e.principal === owner)).toBe(true);
    expect(byNobody).toEqual([]);
    expect(decisions.map((e) => e.behavior)).toEqual(['allow', 'deny']);
    expect(denials.map((e) => [e.action, e.behavior])).toEqual([['permission_decision', 'deny']]);
    expect(newest.map((e) => e.action)).toEqual(['ended', 'detach']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--action must be one of create, attach');

    // A damaged line is reported with a count and a non-zero exit, online and offline.
    appendFileSync(join(state.path, 'audit.jsonl'), 'not a record\n');
    const online = await runTether(['audit', '--json', '--session', s.id], { env: adminEnv });
    expect(online.code).toBe(1);
    expect(lines(online.stdout)).toHaveLength(9);
    expect(online.stderr).toContain('1 line(s) of the audit trail are not audit records');
    const file = await runTether(['audit', '--file', join(state.path, 'audit.jsonl'), '--action', 'stop']);
    expect(file.code).toBe(1);
    expect(lines(file.stdout).map((e) => e.session_id)).toEqual([s.id]);
    const lineNo = readFileSync(join(state.path, 'audit.jsonl'), 'utf8').trimEnd().split('\n').length;
    expect(file.stderr).toContain(`(${join(state.path, 'audit.jsonl')}: line ${lineNo})`);
  }, 120_000); // about 20 tether processes, two gateways

  // Only root can hand a folder to another user here.
  it.skipIf(process.getuid?.() !== 0)(
    'a gateway refuses to start on a state folder another user owns, saying so, before any port opens',
    async () => {
      const state = temp('tether-state-');
      chmodSync(state.path, 0o755);
      chownSync(state.path, 65534, 65534);
      const r = await runTether(['gateway', '--port', '0', '--state-dir', state.path]);
      expect(r.code).toBe(1);
      expect(r.stdout).not.toContain('gateway: ');
      expect(r.stderr).toContain(`${state.path} is owned by uid 65534, not by this user (uid 0)`);
      expect(statSync(state.path).mode & 0o777).toBe(0o755);
    },
  );
});
