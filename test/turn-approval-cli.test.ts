import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runTether, startTether } from './support/cli.js';
import { cleanupsPerTest } from './support/cleanups.js';

/** `--turn-approval` on `tether chat` and `tether run` (issue 31), against `tether up` with a policy that names approvers. */
describe('tether chat/run --turn-approval', () => {
  const cleanups = cleanupsPerTest();

  it("is in --help; a stricter setting than the policy's is kept with the session, a looser one and a malformed one are refused", async () => {
    for (const command of ['chat', 'run']) expect((await runTether([command, '--help'])).stdout).toContain('--turn-approval WHO');
    const dir = cleanups.tempDir('tether-turns-');
    const state = join(dir.path, 'state');
    const policy = join(dir.path, 'policy.yaml');
    writeFileSync(policy, 'turnApproval: { approvers: [carol, dana] }\n');
    const daemon = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', dir.path, '--state-dir', state, '--policy', policy]);
    cleanups.push(() => daemon.stop('SIGKILL'));
    const env = {
      TETHER_GATEWAY: (await daemon.line('gateway: ')).slice('gateway: '.length),
      TETHER_TOKEN: (await daemon.line('token: ')).slice('token: '.length),
      TETHER_AGENT: 'local',
    };

    const stricter = await runTether(['chat', '--json', '--turn-approval', 'approvers:carol'], { env, input: '' });
    expect(stricter.stderr).toBe('');
    const owner = await runTether(['run', '--turn-approval', 'owner', 'say hi'], { env });
    expect(owner.code).toBe(0);
    const looser = await runTether(['chat', '--json', '--turn-approval', 'anyController'], { env, input: '' });
    expect(looser.code).not.toBe(0);
    expect(looser.stderr).toContain(
      'turn approval "anyController" is less strict than the policy\'s (policy rule: turnApproval = approvers: carol, dana)',
    );
    const outside = await runTether(['run', '--turn-approval', 'approvers:mallory', 'say hi'], { env });
    expect(outside.stderr).toContain("less strict than the policy's");
    const bogus = await runTether(['run', '--turn-approval', 'everyone', 'say hi'], { env });
    expect(bogus.code).not.toBe(0);
    expect(bogus.stderr).toContain('--turn-approval must be owner, anyController or approvers:NAME[,NAME...] (not "everyone")');

    const audit = await runTether(['audit', '--state-dir', state, '--action', 'create', '--json']);
    const creates = audit.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { result?: string; options?: { turn_approval?: unknown } });
    expect(creates.filter((r) => r.result === undefined).map((r) => r.options?.turn_approval)).toEqual([{ approvers: ['carol'] }, 'owner']);
    expect(creates.filter((r) => r.result === 'refused')).toHaveLength(2);
  }, 90_000);
});
