import { existsSync, mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPermissionRequest, type PermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import { Policy } from '../core/policy/policy.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { rejectionOf } from './support/items.js';
import { readTurn } from './support/turns.js';
import { withTimeout } from './support/wait.js';

/**
 * Issue 27, items 2 and 5 together, with the real CLI: the policy hook judged the call the
 * engine asked about (with symlinks followed by the agent); an answer's updatedInput is judged
 * at the gateway only as written, where no symlink can be followed. So an answer may not move
 * the call to another path: through a symlink in the session folder it would reach a folder
 * a deny rule protects.
 */

describe('an answer cannot move a tool call to another path', () => {
  let rig: EngineRig;
  let guarded: TempDir;
  beforeAll(async () => {
    guarded = makeTempDir('tether-guarded-');
    const protectedDir = realpathSync(guarded.path);
    rig = await startRig(
      'claude',
      { responses: [] },
      { policy: new StaticPolicy(Policy.compile({ permissions: { deny: [`Edit(/${protectedDir}/**)`] } })) },
    );
  });
  afterAll(async () => {
    await rig?.stop();
    guarded?.cleanup();
  });

  async function firstPrompt(items: AsyncIterator<SessionItem>): Promise<PermissionRequest> {
    return withTimeout(
      (async () => {
        for (;;) {
          const next = await items.next();
          if (next.done) throw new Error('session ended before a prompt');
          const ask = next.value.kind === 'engine' ? asPermissionRequest(next.value.message) : undefined;
          if (ask) return ask;
        }
      })(),
      30_000,
      'the permission prompt',
    );
  }

  it('a Write answered with a file_path through a symlink into the protected folder is refused; the call as asked still runs', async () => {
    const cwd = join(rig.cwd, 'work');
    mkdirSync(cwd);
    symlinkSync(guarded.path, join(cwd, 'link'));
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent', options: { cwd } });
    const asked = { file_path: join(cwd, 'ok.txt'), content: 'fine' };
    rig.fake!.setScenario({
      responses: [{ text: 'Writing.', tool_use: { id: 'toolu_write', name: 'Write', input: asked } }, { text: 'Done.' }],
    });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('write a file');
    const ask = await firstPrompt(items);
    expect(ask.toolName).toBe('Write');

    const err = await rejectionOf(
      session.answer(ask.requestId, { behavior: 'allow', updatedInput: { file_path: join(cwd, 'link', 'planted.txt'), content: 'owned' } }),
    );
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toContain('file_path');
    await session.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }); // still open
    await readTurn(session, () => undefined, items);
    expect(existsSync(join(guarded.path, 'planted.txt'))).toBe(false);
    expect(existsSync(join(cwd, 'ok.txt'))).toBe(true);
    await session.stop();
  });
});
