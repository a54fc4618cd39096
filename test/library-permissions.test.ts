import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { answerQuestions, askQuestions, type PermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import { demoSessionAt, startRig } from './support/engines.js';
import { isCanUseTool, isResult, until } from './support/items.js';
import { toolResults } from './support/turns.js';
import { cleanupsPerTest } from './support/cleanups.js';

const engineMessages = (items: SessionItem[]) =>
  items.filter((i) => i.kind === 'engine' && i.origin === 'engine').map((i) => (i as { message: Record<string, unknown> }).message);

/** The library's canUseTool-style callback: allow with input, deny with a message, remember for the session. */
describe('library permission callback', () => {
  const cleanups = cleanupsPerTest();

  it('remember-for-session asks once; deny carries its message; AskUserQuestion answers reach the engine', async () => {
    const rig = cleanups.own(await startRig('demo'));
    const asked: PermissionRequest[] = [];
    let denyNext = false;
    const session = await (await rig.stack.client()).createSession({
      agent: 'test-agent',
      canUseTool: (req) => {
        asked.push(req);
        if (req.toolName === 'AskUserQuestion') {
          const q = askQuestions(req.input)[0];
          return answerQuestions(req.input, { [q.question]: q.options[1].label }) as {
            behavior: 'allow';
            updatedInput: Record<string, unknown>;
          };
        }
        if (denyNext) return { behavior: 'deny', message: 'Not today' };
        return { behavior: 'allow', updatedInput: req.input, rememberForSession: true };
      },
    });
    const it = session[Symbol.asyncIterator]();
    const items: SessionItem[] = [];
    await session.sendUserMessage('create a file');
    await until(it, isResult, items);
    denyNext = true; // remembered: not asked again, so this is never used
    await session.sendUserMessage('create a file again');
    await until(it, isResult, items);
    expect(asked.map((a) => a.toolName)).toEqual(['Bash']);
    expect(toolResults(engineMessages(items)).filter((r) => !r.is_error)).toHaveLength(2);

    await session.sendUserMessage('ask me a question');
    const last = (await until(it, isResult, items)) as { message: Record<string, unknown> };
    expect(asked.map((a) => a.toolName)).toEqual(['Bash', 'AskUserQuestion']);
    expect(String(last.message.result)).toContain('Blue');
  });

  it('a late attacher decides only prompts still pending, not ones already decided in the history', async () => {
    const { rig, session: s, it, item } = await demoSessionAt(cleanups, 'create a file', isCanUseTool);
    const first = item as { message: Record<string, unknown> };
    await s.answer(String(first.message.request_id), { behavior: 'deny', message: 'first one denied by the owner' });
    await until(it, isResult);
    await s.sendUserMessage('create a file please');
    await until(it, isCanUseTool); // pending now, nobody answers here
    const asked: string[] = [];
    const late = await (await rig.stack.client({ sub: 'late-user' })).attach(s.id, {
      canUseTool: (req) => {
        asked.push(req.requestId);
        return { behavior: 'allow', updatedInput: req.input };
      },
    });
    const items: SessionItem[] = [];
    const li = late[Symbol.asyncIterator]();
    await until(li, isResult, items);
    await until(li, isResult, items);
    expect(asked).toHaveLength(1);
    expect(asked[0]).not.toBe(first.message.request_id);
    const results = toolResults(engineMessages(items));
    expect(results.map((r) => r.is_error)).toEqual([true, false]);
  });

  it('remember-for-session grants the rule the engine proposed, not the tool: after an echo | tee, an rm still asks (real CLI)', async () => {
    const rig = cleanups.own(
      await startRig('claude', {
        responses: [
          {
            text: 'Logging.',
            tool_use: { id: 'toolu_tee', name: 'Bash', input: { command: 'echo hello | tee log.txt', description: 'log a line' } },
          },
          { text: 'Logged.' },
          {
            text: 'Cleaning up.',
            tool_use: { id: 'toolu_rm', name: 'Bash', input: { command: 'rm keep.txt', description: 'remove a file' } },
          },
          { text: 'Kept it.' },
        ],
      }),
    );
    writeFileSync(join(rig.cwd, 'keep.txt'), 'precious\n');
    const asked: string[] = [];
    const session = await (await rig.stack.client()).createSession({
      agent: 'test-agent',
      canUseTool: (req) => {
        asked.push(String(req.input.command));
        return asked.length === 1
          ? { behavior: 'allow', updatedInput: req.input, rememberForSession: true }
          : { behavior: 'deny', message: 'not that' };
      },
    });
    const it = session[Symbol.asyncIterator]();
    await session.sendUserMessage('Log hello');
    await until(it, isResult);
    expect(existsSync(join(rig.cwd, 'log.txt'))).toBe(true);
    await session.sendUserMessage('Clean up');
    await until(it, isResult);
    expect(asked).toEqual(['echo hello | tee log.txt', 'rm keep.txt']);
    expect(existsSync(join(rig.cwd, 'keep.txt'))).toBe(true);
  }, 60_000);
});
