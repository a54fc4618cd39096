import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { realPath, resolvedPaths } from '../agent/policy-paths.js';
import { POLICY_CALLBACK_ID } from '../core/policy/hook.js';
import { Policy } from '../core/policy/policy.js';
import { parseRule, type RuleKind, type ToolCall } from '../core/policy/rules.js';

/**
 * Path rules judge where a path really leads as well as how it is written (issue 27, item 5):
 * the agent follows symlinks on its machine, the gateway's rules match either path.
 */

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = realpathSync(mkdtempSync(join(tmpdir(), 'tether-paths-')));
  dirs.push(d);
  return d;
}

const hookLine = (cwd: string, tool_input: Record<string, unknown>, callback_id = POLICY_CALLBACK_ID) => ({
  type: 'control_request',
  request_id: 'r1',
  request: { subtype: 'hook_callback', callback_id, input: { hook_event_name: 'PreToolUse', cwd, tool_name: 'Write', tool_input } },
});

describe('the agent follows symlinks of a policy hook call', () => {
  it('resolves the tool path through a symlink, for files not created yet, relative to the hook cwd, and through link/..', () => {
    const root = tmp();
    const session = join(root, 'session');
    const protectedDir = join(root, 'protected');
    mkdirSync(join(protectedDir, 'sub'), { recursive: true });
    mkdirSync(session);
    symlinkSync(join(protectedDir, 'sub'), join(session, 'link'));
    expect(realPath(join(session, 'link', 'new.txt'))).toBe(join(protectedDir, 'sub', 'new.txt'));
    expect(realPath(join(session, 'link', 'a', 'b.txt'))).toBe(join(protectedDir, 'sub', 'a', 'b.txt'));
    expect(realPath(`${session}/link/../x`)).toBe(join(protectedDir, 'x')); // the kernel climbs from where the link leads
    expect(resolvedPaths(hookLine(session, { file_path: 'link/new.txt' }))).toEqual({
      cwd: session,
      path: join(protectedDir, 'sub', 'new.txt'),
    });
    expect(resolvedPaths(hookLine(session, { pattern: '*' }))).toEqual({ cwd: session });
    expect(resolvedPaths(hookLine(session, { file_path: 'x' }, 'someone_else'))).toBeUndefined();
    expect(resolvedPaths({ type: 'assistant' })).toBeUndefined();
  });
});

describe('path rules match the written or the resolved path', () => {
  const CWD = '/srv/proj';
  const call = (tool: string, path: string, real?: string): ToolCall => ({
    tool,
    input: { file_path: path },
    cwd: CWD,
    resolved: real === undefined ? undefined : { cwd: CWD, path: real },
  });
  const matches = (rule: string, c: ToolCall, kind: RuleKind) => parseRule(rule).matches(c, kind);

  it('deny and ask: either path; allow: both', () => {
    const viaLink = call('Write', '/srv/proj/link/a.txt', '/protected/a.txt');
    expect(matches('Edit(//protected/**)', viaLink, 'deny')).toBe(true);
    expect(matches('Read(//protected/**)', call('Read', 'link/a.txt', '/protected/a.txt'), 'ask')).toBe(true);
    expect(matches('Edit(//protected/**)', call('Write', '/srv/proj/a.txt', '/srv/proj/a.txt'), 'deny')).toBe(false);
    expect(matches('Edit(/link/**)', viaLink, 'deny')).toBe(true); // the written path still counts
    expect(matches('Edit(/**)', viaLink, 'allow')).toBe(false); // allowed as written, not where it leads
    expect(matches('Edit(/**)', call('Write', '/srv/proj/a.txt', '/srv/proj/a.txt'), 'allow')).toBe(true);
    const p = Policy.compile({ permissions: { deny: ['Edit(//protected/**)'], allow: ['Edit(/**)'] } });
    expect(p.decide(viaLink, 'acceptEdits')).toEqual({ decision: 'deny', rule: 'Edit(//protected/**)' });
  });

  it('a search without a path searches the resolved folder too', () => {
    const glob: ToolCall = { tool: 'Glob', input: { pattern: '*' }, cwd: '/srv/link', resolved: { cwd: '/protected' } };
    expect(matches('Read(//protected/**)', glob, 'deny')).toBe(true);
  });
});
