import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Policy } from '../core/policy/policy.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import type { FakeScenario } from './support/fake-anthropic.js';
import { rejectionOf } from './support/items.js';
import { readTurn } from './support/turns.js';

/**
 * The central policy judges what the real Claude Code CLI will do, not how it was spelled
 * (issue 27, items 3, 5 and 7): a mode or model given twice, a write through a symlink, an
 * rm in quotes, by path or after a semicolon.
 */

let rig: EngineRig | undefined;
const temps: TempDir[] = [];
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
  for (const t of temps.splice(0)) t.cleanup();
});

async function start(policy: unknown, scenario: FakeScenario = { responses: [] }): Promise<EngineRig> {
  // Root may launch bypassPermissions only with IS_SANDBOX=1 (docs/engine-protocol.md 1.1).
  rig = await startRig(
    'claude',
    scenario,
    { policy: new StaticPolicy(Policy.compile(policy)), agentOptions: { engineFlags: { allowBypassPermissions: true } } },
    { IS_SANDBOX: '1' },
  );
  return rig;
}

describe('the policy judges the engine argv as the CLI reads it (item 3)', () => {
  it('a second --permission-mode or --model, a mode hidden behind another flag, an unknown mode: refused before any engine starts', async () => {
    const r = await start({ maxPermissionMode: { '*': 'default' }, models: ['claude-tether-test'] });
    const client = await r.stack.client({ sub: 'carol', scopes: ['create', 'control'] });
    const refused = async (extra_args: string[]) => rejectionOf(client.createSession({ agent: 'test-agent', options: { extra_args } }));
    const twice = await refused(['--permission-mode', 'default', '--permission-mode', 'bypassPermissions']);
    expect(twice.code).toBe('PERMISSION_DENIED');
    expect(twice.message).toContain('maxPermissionMode.* = default');
    expect((await refused(['--system-prompt', '--permission-mode', '--permission-mode', 'bypassPermissions'])).code).toBe(
      'PERMISSION_DENIED',
    );
    const model = await refused(['--model', 'claude-tether-test', '--model=claude-off-list']);
    expect(model.code).toBe('PERMISSION_DENIED');
    expect(model.message).toContain('claude-off-list');
    const unknown = await refused(['--permission-mode', 'yolo']);
    expect(unknown.code).toBe('INVALID_ARGUMENT');
    expect(unknown.message).toContain('"yolo" is not a permission mode');
  });

  it('the real CLI keeps the last use of --permission-mode and --model (why every use is judged)', async () => {
    const r = await start({ maxPermissionMode: { '*': 'bypassPermissions' }, models: ['claude-tether-a', 'claude-tether-b'] });
    const client = await r.stack.client();
    const session = await client.createSession({
      agent: 'test-agent',
      options: {
        extra_args: [
          '--permission-mode',
          'default',
          '--permission-mode=acceptEdits',
          '--model',
          'claude-tether-a',
          '--model=claude-tether-b',
        ],
      },
    });
    await session.sendUserMessage('hello');
    const turn = await readTurn(session, () => undefined);
    expect(turn.messages.find((m) => m.type === 'system' && m.subtype === 'init')).toMatchObject({
      permissionMode: 'acceptEdits',
      model: 'claude-tether-b',
    });
    await session.stop();
  });
});

describe('path rules follow symlinks (item 5)', () => {
  it('a deny rule on a folder outside the session stops a Write through a symlink inside it; the file is untouched', async () => {
    const outside = makeTempDir('tether-protected-');
    temps.push(outside);
    writeFileSync(join(outside.path, 'secret.txt'), 'original');
    const r = await start({ permissions: { deny: [`Edit(/${outside.path}/**)`] } });
    symlinkSync(outside.path, join(r.cwd, 'link'));
    r.fake!.setScenario({
      responses: [
        {
          text: 'Writing.',
          tool_use: { id: 'toolu_write', name: 'Write', input: { file_path: join(r.cwd, 'link', 'secret.txt'), content: 'overwritten' } },
        },
        { text: 'Done.' },
      ],
    });
    const client = await r.stack.client();
    const session = await client.createSession({ agent: 'test-agent', options: { permission_mode: 'bypassPermissions' } });
    await session.sendUserMessage('write it');
    await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
    expect(readFileSync(join(outside.path, 'secret.txt'), 'utf8')).toBe('original');
    const seen = r.fake!.lastToolResults().find((t) => t.tool_use_id === 'toolu_write');
    expect(seen).toMatchObject({ is_error: true, content: expect.stringContaining(`Edit(/${outside.path}/**)`) });
    await session.stop();
  });
});

describe('Bash rules match the parsed command (item 7)', () => {
  it.each([`'rm' -f keep.txt`, `/bin/rm -f keep.txt`, `r\\m -f keep.txt`, `echo ok; rm -f keep.txt`])(
    'deny Bash(rm:*) stops %j in bypassPermissions; the file survives',
    async (command) => {
      const r = await start(
        { permissions: { deny: ['Bash(rm:*)'] } },
        {
          responses: [
            { text: 'Removing.', tool_use: { id: 'toolu_rm', name: 'Bash', input: { command, description: 'remove' } } },
            { text: 'Done.' },
          ],
        },
      );
      writeFileSync(join(r.cwd, 'keep.txt'), 'precious');
      const client = await r.stack.client();
      const session = await client.createSession({ agent: 'test-agent', options: { permission_mode: 'bypassPermissions' } });
      await session.sendUserMessage('clean up');
      await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
      expect(existsSync(join(r.cwd, 'keep.txt'))).toBe(true);
      expect(r.fake!.lastToolResults().find((t) => t.tool_use_id === 'toolu_rm')).toMatchObject({
        is_error: true,
        content: expect.stringContaining('Bash(rm:*)'),
      });
      await session.stop();
    },
  );
});
