import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import type { TetherError } from '../core/errors.js';
import { FileAuditLog } from '../gateway/audit/audit-log.js';
import { runTether, startTether, type Daemon } from './support/cli.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { waitFor } from './support/wait.js';

/** `--policy FILE` as an operator uses it: help, a refused file at start, reload on change and SIGHUP. */
describe('tether gateway/up --policy', () => {
  const cleanups = cleanupsPerTest();
  const temp = (prefix: string) => cleanups.tempDir(prefix);

  it('is in --help of gateway and up; a bad file stops the gateway from starting with its path, rule and why', async () => {
    for (const program of ['gateway', 'up']) expect((await runTether([program, '--help'])).stdout).toContain('--policy FILE');
    const dir = temp('tether-policy-');
    const bad = join(dir.path, 'policy.json');
    writeFileSync(bad, JSON.stringify({ permissions: { deny: ['Bash(rm *)', 'Frob(x)'] } }));
    const r = await runTether(['gateway', '--port', '0', '--state-dir', join(dir.path, 'state'), '--policy', bad]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`policy ${bad}: permissions.deny[1] "Frob(x)": Frob(…) specifiers are not supported`);
  });

  it('reloads on change and on SIGHUP, refuses a broken file and keeps the old policy; refusals are audited', async () => {
    const dir = temp('tether-policy-');
    const state = join(dir.path, 'state');
    const file = join(dir.path, 'policy.yaml');
    writeFileSync(file, 'models: [model-a]\n');
    const daemon: Daemon = startTether([
      'up',
      '--port',
      '0',
      '--engine',
      'demo',
      '--cwd',
      dir.path,
      '--state-dir',
      state,
      '--policy',
      file,
      '--log-level',
      'info',
      '--log-format',
      'json',
    ]);
    cleanups.push(() => daemon.stop('SIGKILL'));
    const url = (await daemon.line('gateway: ')).slice('gateway: '.length);
    const token = (await daemon.line('token: ')).slice('token: '.length);
    const client = await GatewayClient.connect({ gateway: url, token, reconnect: false });
    cleanups.push(() => client.close());
    const create = (model: string) => client.createSession({ agent: 'local', options: { model } });
    const refusal = (model: string) =>
      create(model).then(
        () => undefined,
        (err: TetherError) => err,
      );

    expect((await refusal('model-b'))?.message).toContain('policy rule: models = model-a');
    expect((await create('model-a')).id).toBeTruthy();

    let logs = 0;
    const nextLog = async (what: string) => {
      const lines = () =>
        daemon
          .stderr()
          .split('\n')
          .filter((l) => l.includes(what));
      await waitFor(
        () => lines().length > logs,
        10_000,
        () => `a new "${what}" log line\n${daemon.stderr()}`,
      );
      const now = lines();
      return now[(logs = now.length) - 1];
    };

    writeFileSync(file, 'models: [model-a, model-b]\n');
    expect(await nextLog('"msg":"policy ')).toContain('policy reloaded');
    expect((await create('model-b')).id).toBeTruthy();

    writeFileSync(file, 'models: [model-a]\npermissions:\n  deny: ["Read(~/.ssh/**)"]\n');
    const refused = await nextLog('"msg":"policy ');
    expect(refused).toContain('policy file refused; the previous policy stays in force');
    expect(refused).toContain(`policy ${file}: permissions.deny[0] \\"Read(~/.ssh/**)\\"`);
    expect((await create('model-b')).id).toBeTruthy(); // the old policy (model-b allowed) stays

    writeFileSync(file, 'models: [model-a]\n');
    await nextLog('"msg":"policy ');
    daemon.child.kill('SIGHUP');
    expect(await nextLog('"msg":"policy ')).toContain('"why":"SIGHUP"');
    expect((await refusal('model-b'))?.code).toBe('PERMISSION_DENIED');

    const audit = await runTether(['audit', '--state-dir', state, '--action', 'create', '--json']);
    const refusedCreates = audit.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((r) => r.result === 'refused');
    expect(refusedCreates).toHaveLength(2);
    expect(refusedCreates.every((r) => r.decided_by === 'tether:policy' && String(r.reason).includes('models = model-a'))).toBe(true);
  });

  it("tether audit filters the policy's decisions by principal and by every decision, table and JSON", async () => {
    const dir = temp('tether-audit-');
    const file = join(dir.path, 'audit.jsonl');
    const audit = new FileAuditLog(file);
    const decision = (d: string, rule: string | null) => ({
      session_id: 's1',
      principal: 'tether:policy',
      action: 'policy_decision' as const,
      tool: 'Bash',
      input: { command: 'rm -rf x' },
      decision: d,
      rule,
    });
    audit.record(decision('deny', 'Bash(rm *)'));
    audit.record(decision('ask', 'Bash(git push:*)'));
    audit.record(decision('none', null));
    audit.record({
      session_id: 's1',
      principal: 'alice',
      action: 'permission_decision',
      request_id: 'r1',
      tool: 'Bash',
      behavior: 'allow',
      client_id: 'c-1',
    });
    audit.close();
    const json = async (...args: string[]) =>
      (await runTether(['audit', '--file', file, '--json', ...args])).stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect((await json('--principal', 'tether:policy')).map((r) => r.decision)).toEqual(['deny', 'ask', 'none']);
    expect((await json('--decision', 'ask')).map((r) => r.rule)).toEqual(['Bash(git push:*)']);
    expect(await json('--decision', 'none')).toHaveLength(1);
    expect((await json('--decision', 'allow')).map((r) => r.principal)).toEqual(['alice']);
    const table = await runTether(['audit', '--file', file, '--table', '--action', 'policy_decision']);
    expect(table.stdout).toContain('tether:policy');
    expect(table.stdout).toContain('rule="Bash(rm *)"');
    const bad = await runTether(['audit', '--file', file, '--decision', 'maybe']);
    expect(bad.stderr).toContain('allow, deny, ask or none');
  });
});
