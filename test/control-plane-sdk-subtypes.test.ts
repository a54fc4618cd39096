import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Policy } from '../core/policy/policy.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { rejectionOf } from './support/items.js';

/**
 * The control subtypes the Agent SDK 0.3.332 knows beyond those issue 27 listed, with the real
 * CLI 2.1.332 (docs/engine-protocol.md §5.2): the harmless ones reach the engine, the rest
 * need the agent owner's allowance, and `set_cwd` is held to the folders a create's cwd is.
 */

type Reply = { response: { subtype: string; response?: Record<string, any> } };
const statusCwd = (r: Reply) =>
  ((r.response.response?.sections ?? []) as Array<{ rows: Array<{ label: string; value: string }> }>)
    .flatMap((s) => s.rows)
    .find((row) => row.label === 'cwd')?.value;

describe('subtypes the Agent SDK knows, by default', () => {
  let rig: EngineRig;
  beforeAll(async () => {
    rig = await startRig('claude', { responses: [], fallback: { text: 'A side answer.' } });
  });
  afterAll(async () => {
    await rig?.stop();
  });

  it("a controller's harmless ones reach the engine and are answered; the others are refused in the flags' words", async () => {
    const owner = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(owner.id);
    const status = (await bob.request('get_status')) as Reply;
    expect(status.response.subtype).toBe('success');
    expect(statusCwd(status)).toBe(rig.cwd);
    expect(((await bob.request('side_question', { question: 'and?' })) as Reply).response.response).toMatchObject({
      response: 'A side answer.',
    });
    expect(((await bob.request('get_plan')) as Reply).response).toMatchObject({ subtype: 'success', response: { exists: false } });
    expect(((await bob.request('set_prompt_suggestions_paused', { paused: true })) as Reply).response.subtype).toBe('success');
    for (const [subtype, words] of [
      ['claude_authenticate', "it writes the agent user's settings files"],
      ['mcp_authenticate', "it writes the agent user's settings files"],
      ['ultrareview_launch', 'a service other than the model API'],
      ['remote_control', 'a service other than the model API'],
      ['set_cwd', "it reaches files beyond the session's folder"],
      ['claim_session', ''],
    ] as const) {
      const err = await rejectionOf(owner.request(subtype, subtype === 'remote_control' ? { enabled: true } : { path: '/' }));
      expect(err.code, subtype).toBe('PERMISSION_DENIED');
      expect(err.message).toContain(`--allow-engine-control ${subtype}`);
      expect(err.message).toContain(words);
    }
    expect(((await owner.request('remote_control', { enabled: false })) as Reply).response.subtype).toBe('success'); // turning it off is harmless
    await owner.stop();
  });
});

describe("set_cwd, when the agent owner allows it, is held to the session roots and the policy's workingFolders", () => {
  let rig: EngineRig;
  let root: TempDir;
  let outside: TempDir;
  beforeAll(async () => {
    root = makeTempDir('tether-setcwd-root-');
    outside = makeTempDir('tether-setcwd-out-');
    for (const d of ['a', 'b']) mkdirSync(join(root.path, d));
    symlinkSync(outside.path, join(root.path, 'a', 'escape'));
    const policy = new StaticPolicy(
      Policy.compile({ workingFolders: { 'test-agent': [join(root.path, 'a'), join(root.path, 'b'), outside.path] } }),
    );
    rig = await startRig(
      'claude',
      { responses: [] },
      { policy, agentOptions: { engineControls: { allowControls: ['set_cwd'] }, sessionRoots: [root.path] } },
    );
  });
  afterAll(async () => {
    await rig?.stop();
    root?.cleanup();
    outside?.cleanup();
  });

  it('moves inside both; refused outside either, through a symlink, relative, or from a controller', async () => {
    const a = join(root.path, 'a');
    const b = join(root.path, 'b');
    const owner = await (await rig.stack.client()).createSession({ agent: 'test-agent', options: { cwd: a } });
    const policyOut = await rejectionOf(owner.request('set_cwd', { path: root.path })); // a session root, not a policy folder
    expect(policyOut.code).toBe('PERMISSION_DENIED');
    expect(policyOut.message).toContain(`policy rule: workingFolders.test-agent`);
    // The agent's own checks answer in the engine's place (a control_response error).
    const rootOut = await rejectionOf(owner.request('set_cwd', { path: outside.path })); // a policy folder, not a session root
    expect(rootOut.message).toContain(
      `working folder ${outside.path} is outside the folders agent "test-agent" lets sessions use (--session-root`,
    );
    const viaLink = await rejectionOf(owner.request('set_cwd', { path: join(a, 'escape') })); // written inside, leads out
    expect(viaLink.message).toContain('is outside the folders agent "test-agent" lets sessions use');
    expect((await rejectionOf(owner.request('set_cwd', { path: 'b' }))).code).toBe('INVALID_ARGUMENT');
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(owner.id);
    expect((await rejectionOf(bob.request('set_cwd', { path: b }))).message).toContain("may be sent only by the session's owner");
    expect(statusCwd((await owner.request('get_status')) as Reply)).toBe(a);
    // Inside both: the engine answers (it asks for the folder's trust first, then moves).
    const asked = (await owner.request('set_cwd', { path: b })) as Reply;
    expect(asked.response.response).toMatchObject({ status: 'needs_trust', directory: b });
    const moved = (await owner.request('set_cwd', { path: b, trust_accepted: true, trusted_directory: b })) as Reply;
    expect(moved.response.subtype).toBe('success');
    expect(statusCwd((await owner.request('get_status')) as Reply)).toBe(b);
    await owner.stop();
  });
});
