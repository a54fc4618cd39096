/**
 * Issue 31: turnApproval as the policy file, a session's options and the gateway's prompts read
 * it (parsing, the policy's ceiling, who may answer), and the turn's authors as the engine's
 * command_lifecycle frames reveal them. The real CLI's side is in turn-approval-claude.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { TetherError } from '../core/errors.js';
import { Policy } from '../core/policy/policy.js';
import { approvalNeeded, approvalRefusal, atLeastAsStrict, effectiveApproval } from '../core/policy/turn-approval.js';
import { SessionOptions } from '../core/protocol/session-options.js';
import type { TurnApproval } from '../core/protocol/turn-approval.js';
import { MAX_REMEMBERED_UUIDS, stampUserMessage, TurnAuthors, UNKNOWN_AUTHOR } from '../gateway/session/turns/turn-authors.js';
import { engineUpdates, StandingRules } from '../gateway/session/turns/standing-rules.js';

const codeOf = (f: () => unknown): string => {
  try {
    f();
    return 'ok';
  } catch (err) {
    return err instanceof TetherError ? err.code : String(err);
  }
};
const messageOf = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  return '';
};
const lifecycle = (uuid: string, state = 'started') =>
  Buffer.from(JSON.stringify({ type: 'command_lifecycle', command_uuid: uuid, state }));
const U = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

describe('turnApproval in the policy file', () => {
  it('parses the three forms, per gateway and per agent, with groups; refuses unknown groups and bad shapes', () => {
    const p = Policy.compile({
      turnApproval: 'owner',
      turnApprovalByAgent: { lab: { approvers: ['carol', 'group:leads'] } },
      groups: { leads: ['dana'] },
    });
    expect(p.turnApprovalFor('build')).toEqual({ setting: 'owner', rule: 'turnApproval = owner' });
    expect(p.turnApprovalFor('lab')).toEqual({
      setting: { approvers: ['carol', 'group:leads'] },
      rule: 'turnApprovalByAgent.lab = approvers: carol, group:leads',
    });
    expect(Policy.EMPTY.turnApprovalFor('any')).toEqual({ setting: 'anyController', rule: 'turnApproval = anyController' });
    expect(messageOf(() => Policy.compile({ turnApproval: { approvers: ['group:nobody'] } }))).toContain(
      'turnApproval: approvers entry "group:nobody" names no group',
    );
    expect(codeOf(() => Policy.compile({ turnApproval: 'everyone' }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => Policy.compile({ turnApproval: { approvers: [] } }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => Policy.compile({ turnApproval: { approvers: ['a'], extra: 1 } }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => Policy.compile({ turnApprovalByAgent: { lab: { approvers: ['group:x'] } } }))).toBe('INVALID_ARGUMENT');
  });

  it("a session may ask only for a stricter one: anyController < approvers < owner, approvers within the policy's", () => {
    const policy = Policy.compile({ turnApproval: { approvers: ['carol', 'group:leads'] }, groups: { leads: ['dana', 'erin'] } });
    expect(codeOf(() => policy.checkTurnApproval('a', undefined))).toBe('ok');
    expect(codeOf(() => policy.checkTurnApproval('a', 'owner'))).toBe('ok');
    expect(codeOf(() => policy.checkTurnApproval('a', { approvers: ['carol'] }))).toBe('ok');
    expect(codeOf(() => policy.checkTurnApproval('a', { approvers: ['dana'] }))).toBe('ok'); // a member of a listed group
    expect(codeOf(() => policy.checkTurnApproval('a', { approvers: ['group:leads'] }))).toBe('ok');
    expect(messageOf(() => policy.checkTurnApproval('a', 'anyController'))).toContain(
      "less strict than the policy's (policy rule: turnApproval = approvers: carol, group:leads)",
    );
    expect(codeOf(() => policy.checkTurnApproval('a', { approvers: ['carol', 'mallory'] }))).toBe('PERMISSION_DENIED');
    expect(codeOf(() => policy.checkTurnApproval('a', { approvers: ['group:nobody'] }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => Policy.compile({ turnApproval: 'owner' }).checkTurnApproval('a', { approvers: ['carol'] }))).toBe(
      'PERMISSION_DENIED',
    );
    expect(codeOf(() => Policy.EMPTY.checkTurnApproval('a', { approvers: ['anyone'] }))).toBe('ok');
    // The session option's shape is the same one.
    expect(SessionOptions.safeParse({ turn_approval: 'owner' }).success).toBe(true);
    expect(SessionOptions.safeParse({ turn_approval: 'nobody' }).success).toBe(false);
  });

  it("the setting in force is the session's only while it is at least as strict as the policy's (a reload may raise the floor)", () => {
    expect(effectiveApproval('anyController', 'owner', {})).toBe('owner');
    expect(effectiveApproval('owner', { approvers: ['carol'] }, {})).toBe('owner');
    expect(effectiveApproval({ approvers: ['carol'] }, undefined, {})).toEqual({ approvers: ['carol'] });
    expect(atLeastAsStrict({ approvers: ['group:leads'] }, { approvers: ['dana'] }, { leads: ['dana'] })).toBe(false); // a group may grow
  });
});

describe('whose approval a call needs', () => {
  const owner = 'olive';
  const approvers: TurnApproval = { approvers: ['carol', 'group:leads'] };
  const groups = { leads: ['dana', 'bob'] };

  it("anyController, or the owner's own turn: anyone in control; someone else's turn: the owner or the approvers, never its author", () => {
    expect(approvalNeeded('anyController', { owner, authors: ['bob'] })).toBeUndefined();
    expect(approvalNeeded('owner', { owner, authors: ['olive'] })).toBeUndefined();
    expect(approvalNeeded('owner', { owner, authors: [] })).toEqual({ kind: 'owner', mayAnswer: ['olive'] }); // unknown author: fail closed
    expect(approvalNeeded('owner', { owner, authors: ['olive', 'bob'] })).toEqual({ kind: 'owner', mayAnswer: ['olive'] }); // bob's prompt joined the turn
    const need = approvalNeeded(approvers, { owner, authors: ['carol'] })!;
    expect(need).toEqual({ kind: 'approvers', mayAnswer: ['olive', 'group:leads'] });
    const refusal = (who: string, authors: string[], setting: TurnApproval = approvers) =>
      approvalRefusal(approvalNeeded(setting, { owner, authors })!, setting, who, { owner, authors }, groups);
    expect(refusal('olive', ['bob'])).toBeUndefined();
    expect(refusal('carol', ['bob'])).toBeUndefined();
    expect(refusal('dana', ['bob'])).toBeUndefined(); // through the group
    expect(refusal('bob', ['bob'])).toBe(
      'needs the approval of the owner (olive) or of an approver (carol, group:leads): this call comes from your turn',
    );
    expect(refusal('carol', ['carol'])).toContain('this call comes from your turn');
    expect(refusal('erin', ['bob'])).toContain("this call comes from bob's turn");
    expect(refusal('bob', ['bob'], 'owner')).toBe("needs the owner's approval: this call comes from your turn (the owner is olive)");
    expect(refusal('carol', ['bob', 'dana'], 'owner')).toContain("this call comes from bob and dana's turn");
  });
});

describe('turn authors', () => {
  it('stamps a uuid and a human origin unless given; refuses a uuid that is not one', () => {
    const stamped = stampUserMessage({ type: 'user', message: { role: 'user', content: 'hi' } });
    expect(stamped.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(stamped.origin).toEqual({ kind: 'human' });
    expect(stampUserMessage({ type: 'user', uuid: U(1), origin: { kind: 'channel', server: 's' } })).toMatchObject({
      uuid: U(1),
      origin: { kind: 'channel', server: 's' },
    });
    expect(codeOf(() => stampUserMessage({ type: 'user', uuid: 'not-a-uuid' }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => stampUserMessage({ type: 'user', uuid: 7 }))).toBe('INVALID_ARGUMENT');
  });

  it('a turn is started by one message, joined by those folded into it, ended by the result; a queued message starts the next', () => {
    const turns = new TurnAuthors();
    turns.sent(U(1), 'olive', true);
    turns.sent(U(2), 'bob', false);
    turns.sent(U(3), 'carol', true);
    expect(turns.current).toEqual([]);
    expect(turns.lifecycle(lifecycle(U(1), 'queued'))).toEqual({ ours: true }); // the gateway's own uuid: the line stays at the gateway
    expect(turns.lifecycle(lifecycle(U(1)))).toEqual({ change: { state: 'started', uuid: U(1), authors: ['olive'] }, ours: true });
    expect(turns.lifecycle(lifecycle(U(2)))).toEqual({ change: { state: 'joined', uuid: U(2), authors: ['olive', 'bob'] }, ours: false }); // folded mid-turn; bob chose his uuid
    turns.ended();
    expect(turns.current).toEqual([]);
    expect(turns.lifecycle(lifecycle(U(3)))?.change).toEqual({ state: 'started', uuid: U(3), authors: ['carol'] });
    turns.ended();
    expect(turns.lifecycle(lifecycle(U(9)))).toEqual({ change: { state: 'started', uuid: U(9), authors: [UNKNOWN_AUTHOR] }, ours: false }); // not sent through here: fails closed
    expect(turns.lifecycle(Buffer.from('{not json'))).toEqual({ ours: false });
  });

  it("refuses a uuid another member's message used; remembers a bounded number", () => {
    const turns = new TurnAuthors();
    turns.sent(U(1), 'olive', false);
    turns.sent(U(1), 'olive', false); // the same sender again is no theft
    expect(codeOf(() => turns.sent(U(1), 'bob', false))).toBe('ALREADY_EXISTS');
    for (let n = 2; n <= MAX_REMEMBERED_UUIDS + 1; n++) turns.sent(U(n), 'olive', true);
    expect(turns.lifecycle(lifecycle(U(1)))?.change?.authors).toEqual([UNKNOWN_AUTHOR]);
  });
});

describe('standing rules, per person', () => {
  const grant = (ruleContent: string) => [
    { type: 'addRules', rules: [{ toolName: 'Bash', ruleContent }], behavior: 'allow', destination: 'session' },
  ];
  const bash = (command: string) => ({ tool: 'Bash', input: { command }, cwd: '/w' });
  const anyone = () => true;

  it("a member's rule answers only their own turns, the owner's everyone's, and only while its grantor may approve the turn", () => {
    const rules = new StandingRules();
    rules.granting('alice', grant('npm test'), false);
    rules.granting('olive', grant('ls *'), true);
    expect(rules.allowing(bash('npm test'), ['alice'], anyone)?.grantedBy).toBe('alice');
    expect(rules.allowing(bash('npm test'), ['bob'], anyone)).toBeUndefined();
    expect(rules.allowing(bash('npm test'), ['alice', 'bob'], anyone)).toBeUndefined(); // bob's prompt joined her turn
    expect(rules.allowing(bash('npm test'), [], anyone)).toBeUndefined();
    expect(rules.allowing(bash('ls -la'), ['bob'], anyone)?.grantedBy).toBe('olive');
    expect(rules.allowing(bash('ls -la'), ['bob'], (g) => g !== 'olive')).toBeUndefined();
    expect(rules.allowing(bash('npm test && rm -rf x'), ['alice'], anyone)).toBeUndefined();
  });

  it('a wildcard rule never answers a command with a redirect (the engine asks about those)', () => {
    const rules = new StandingRules();
    rules.granting('alice', grant('echo one *'), false);
    expect(rules.allowing(bash('echo one two'), ['alice'], anyone)?.label).toBe('Bash(echo one *)');
    expect(rules.allowing(bash('echo one >> log.txt'), ['alice'], anyone)).toBeUndefined();
    expect(rules.allowing(bash('echo one "a>b"'), ['alice'], anyone)).toBeUndefined(); // the cautious reading: people decide
    rules.granting('alice', grant('echo two > b.txt'), false); // an exact rule grants that very command, redirect and all
    expect(rules.allowing(bash('echo two > b.txt'), ['alice'], anyone)?.label).toBe('Bash(echo two > b.txt)');
    expect(rules.allowing(bash('echo two > c.txt'), ['alice'], anyone)).toBeUndefined();
  });

  it('is withdrawn by its grantor or the owner only; the engine never gets session allow rules', () => {
    const rules = new StandingRules();
    rules.granting('alice', grant('npm test'), false);
    expect(codeOf(() => rules.withdraw('Bash(npm test)', 'bob', false))).toBe('PERMISSION_DENIED');
    expect(codeOf(() => rules.withdraw('Bash(npm test)', 'olive', true))).toBe('ok');
    expect(rules.allowing(bash('npm test'), ['alice'], anyone)).toBeUndefined();
    expect(codeOf(() => rules.withdraw('Bash(npm test)', 'olive', true))).toBe('NOT_FOUND');
    const dirs = { type: 'addDirectories', directories: ['/w'], destination: 'session' };
    expect(engineUpdates([...grant('npm test'), dirs, { ...grant('x')[0], destination: 'localSettings' }])).toEqual([
      dirs,
      { ...grant('x')[0], destination: 'localSettings' },
    ]);
  });
});
