import { describe, expect, it } from 'vitest';
import { controlResponse, permissionAnswer, questionAnswer, riskLevel } from '../gateway/dialects/jsonrpc/answers.js';

/** What the dialect's answers become in the engine's permission protocol (engine-protocol.md 6, 7). */
describe('JSON-RPC dialect answers', () => {
  const input = { command: 'ls' };

  it("allow once runs the input unchanged; allow for the session keeps the engine's proposed allow rules for this session only", () => {
    const suggestions = [
      { type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: 'ls *' }], behavior: 'allow', destination: 'localSettings' },
      { type: 'addDirectories', directories: ['/elsewhere'], destination: 'session' },
    ];
    expect(permissionAnswer('Bash', input, { decision: 'allow', scope: 'once' }, suggestions)).toEqual({
      behavior: 'allow',
      updatedInput: input,
    });
    expect(permissionAnswer('Bash', input, { decision: 'allow', scope: 'session' }, suggestions)).toEqual({
      behavior: 'allow',
      updatedInput: input,
      updatedPermissions: [
        { type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: 'ls *' }], behavior: 'allow', destination: 'session' },
      ],
    });
    // Nothing proposed: allowed once (a rule for the whole tool would be wider than the engine asked).
    expect(permissionAnswer('Bash', input, { decision: 'allow', scope: 'session' })).toEqual({ behavior: 'allow', updatedInput: input });
  });

  it('deny carries the message, or a default the model can read', () => {
    expect(permissionAnswer('Bash', input, { decision: 'deny', scope: 'once', message: 'not now' })).toEqual({
      behavior: 'deny',
      message: 'not now',
    });
    expect(permissionAnswer('Bash', input, { decision: 'deny', scope: 'session' })).toEqual({
      behavior: 'deny',
      message: 'The user denied this tool call.',
    });
  });

  it('AskUserQuestion: answers are added to the input; a dismissal or no answer denies', () => {
    const q = { questions: [{ question: 'Which?', options: [] }] };
    expect(questionAnswer(q, { answers: { 'Which?': 'SQLite' } })).toEqual({
      behavior: 'allow',
      updatedInput: { ...q, answers: { 'Which?': 'SQLite' } },
    });
    expect(questionAnswer(q, { dismissed: true }).behavior).toBe('deny');
    expect(questionAnswer(q, undefined).behavior).toBe('deny');
  });

  it('risk levels: reads low, edits medium, the rest high', () => {
    expect([
      riskLevel('Read'),
      riskLevel('Grep'),
      riskLevel('Edit'),
      riskLevel('Write'),
      riskLevel('Bash'),
      riskLevel('mcp__x__y'),
    ]).toEqual(['low', 'low', 'medium', 'medium', 'high', 'high']);
  });

  it('control_response envelope', () => {
    expect(controlResponse('r1', { behavior: 'allow' })).toEqual({
      type: 'control_response',
      response: { subtype: 'success', request_id: 'r1', response: { behavior: 'allow' } },
    });
  });
});
