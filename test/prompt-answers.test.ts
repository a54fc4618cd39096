import { describe, expect, it } from 'vitest';
import { Policy } from '../core/policy/policy.js';
import { checkAnswer, promptCallOf, type PromptCall } from '../gateway/policy/prompt-answers.js';
import { thrownBy } from './support/thrown.js';

/** The rules of gateway/policy/prompt-answers.ts, case by case (the real CLI's side: permission-answers.test.ts). */
describe('checkAnswer', () => {
  const policy = Policy.compile({ permissions: { deny: ['Bash(rm *)'], ask: ['Bash(git push *)'] } });
  const call: PromptCall = promptCallOf({
    subtype: 'can_use_tool',
    tool_name: 'Bash',
    input: { command: 'echo hi > made.txt' },
    permission_suggestions: [
      { type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: 'echo hi *' }], behavior: 'allow', destination: 'localSettings' },
      { type: 'addDirectories', directories: ['/srv/checkout'], destination: 'session' },
      { type: 'setMode', mode: 'acceptEdits', destination: 'session' },
    ],
  })!;
  const rule = (ruleContent?: string) => ({
    type: 'addRules',
    rules: [{ toolName: 'Bash', ...(ruleContent === undefined ? {} : { ruleContent }) }],
    behavior: 'allow',
    destination: 'session',
  });
  const allow = (extra: Record<string, unknown>) => ({ behavior: 'allow', updatedInput: call.input, ...extra });
  /** The error code of checking `answer` in session folder `cwd` (null: not known at the gateway), or 'ok'. */
  const code = (answer: Record<string, unknown>, cwd: string | null = '/srv/checkout') =>
    thrownBy(() => checkAnswer(policy, call, answer, cwd ?? undefined))?.code ?? 'ok';

  it('judges updatedInput as the call: deny always, ask when it changed the input shown', () => {
    expect(code({ behavior: 'allow', updatedInput: { command: 'rm -rf /' } })).toBe('PERMISSION_DENIED');
    expect(code({ behavior: 'allow', updatedInput: { command: 'git push origin main' } })).toBe('PERMISSION_DENIED');
    expect(code({ behavior: 'allow', updatedInput: { command: 'echo other' } })).toBe('ok');
    expect(code({ behavior: 'allow', updatedInput: 'rm -rf /' })).toBe('INVALID_ARGUMENT');
    expect(code({ behavior: 'deny', message: 'no' })).toBe('ok');
    expect(checkAnswer(policy, call, { behavior: 'allow', updatedInput: { command: 'echo other' } }, undefined)).toMatchObject({
      input: { command: 'echo other' },
      inputChanged: true,
    });
    // AskUserQuestion's answer is added to its input: an ask rule on it is what the prompt is.
    const question = promptCallOf({ subtype: 'can_use_tool', tool_name: 'AskUserQuestion', input: { questions: [] } })!;
    const asking = Policy.compile({ permissions: { ask: ['AskUserQuestion'] } });
    expect(
      thrownBy(() => checkAnswer(asking, question, { behavior: 'allow', updatedInput: { questions: [], answers: { q: 'a' } } }, undefined)),
    ).toBeUndefined();
  });

  it('keeps a rule only for the session and no wider than proposed', () => {
    expect(code(allow({ updatedPermissions: [rule('echo hi *')] }))).toBe('ok');
    expect(code(allow({ updatedPermissions: [rule('echo hi there')] }))).toBe('ok');
    expect(code(allow({ updatedPermissions: [rule('echo hi there *')] }))).toBe('ok');
    for (const wider of [undefined, '*', 'echo *', 'echo h*', 'rm *'])
      expect(code(allow({ updatedPermissions: [rule(wider)] })), String(wider)).toBe('PERMISSION_DENIED');
    for (const destination of ['userSettings', 'projectSettings', 'localSettings', 'cliArg', undefined]) {
      expect(code(allow({ updatedPermissions: [{ ...rule('echo hi *'), destination }] })), String(destination)).toBe('PERMISSION_DENIED');
    }
    expect(code(allow({ updatedPermissions: [{ ...rule('rm *'), behavior: 'deny' }] }))).toBe('ok'); // a deny rule only narrows
    expect(code(allow({ updatedPermissions: [{ type: 'replaceRules', rules: [], behavior: 'deny', destination: 'session' }] }))).toBe(
      'PERMISSION_DENIED',
    );
    expect(code(allow({ updatedPermissions: 'all' }))).toBe('INVALID_ARGUMENT');
  });

  it('folders only as proposed and inside the session folder; modes only as proposed', () => {
    const dirs = (d: string) => allow({ updatedPermissions: [{ type: 'addDirectories', directories: [d], destination: 'session' }] });
    expect(code(dirs('/srv/checkout'))).toBe('ok');
    expect(code(dirs('/srv/checkout'), '/srv/checkout/sub')).toBe('PERMISSION_DENIED');
    expect(code(dirs('/srv/checkout'), null)).toBe('PERMISSION_DENIED');
    expect(code(dirs('/'))).toBe('PERMISSION_DENIED');
    expect(code(allow({ updatedPermissions: [{ type: 'setMode', mode: 'acceptEdits', destination: 'session' }] }))).toBe('ok');
    expect(code(allow({ updatedPermissions: [{ type: 'setMode', mode: 'bypassPermissions', destination: 'session' }] }))).toBe(
      'PERMISSION_DENIED',
    );
  });
});
