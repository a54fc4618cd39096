import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Policy } from '../core/policy/policy.js';
import { parseRule, RuleError, type RuleKind, type ToolCall } from '../core/policy/rules.js';
import { checkControlRequest, checkSessionOptions } from '../gateway/policy/policy-gate.js';
import { FilePolicy, readPolicyFile } from '../gateway/policy/policy-source.js';
import { withTimeout } from './support/stack.js';
import { thrownBy } from './support/thrown.js';

const CWD = '/srv/proj';
const bash = (command: string): ToolCall => ({ tool: 'Bash', input: { command }, cwd: CWD });
const file = (tool: string, path: string): ToolCall => ({ tool, input: { file_path: path }, cwd: CWD });
const matches = (rule: string, call: ToolCall, kind: RuleKind = 'deny') => parseRule(rule).matches(call, kind);

describe('permission rules in Claude Code syntax', () => {
  it('a bare tool name (or Tool(*)) matches every use of that tool only', () => {
    expect(matches('Bash', bash('ls'))).toBe(true);
    expect(matches('Bash(*)', bash('anything at all'))).toBe(true);
    expect(matches('Read', file('Read', '/x'))).toBe(true);
    expect(matches('Read', file('Edit', '/x'))).toBe(false);
  });

  it('Bash: exact, legacy prefix:* with a word boundary, and * wildcards (a trailing " *" also matches the bare command)', () => {
    expect(matches('Bash(npm run build)', bash('npm run build'))).toBe(true);
    expect(matches('Bash(npm run build)', bash('npm run build --watch'))).toBe(false);
    expect(matches('Bash(git log:*)', bash('git log --oneline'))).toBe(true);
    expect(matches('Bash(git log:*)', bash('git log'))).toBe(true);
    expect(matches('Bash(git log:*)', bash('git logx'))).toBe(false);
    expect(matches('Bash(rm *)', bash('rm -rf x'))).toBe(true);
    expect(matches('Bash(rm *)', bash('rm'))).toBe(true);
    expect(matches('Bash(rm *)', bash('rmdir x'))).toBe(false);
    expect(matches('Bash(git * main)', bash('git push origin main'))).toBe(true);
    expect(matches('Bash(git * main)', bash('git push origin dev'))).toBe(false);
  });

  it('Bash compound commands: deny and ask match when any part does, allow only when every part does', () => {
    expect(matches('Bash(rm *)', bash('cd /tmp && rm -rf x'))).toBe(true);
    expect(matches('Bash(rm *)', bash('ls; rm -rf x'))).toBe(true);
    expect(matches('Bash(rm *)', bash('ls | rm -rf x'))).toBe(true);
    expect(matches('Bash(rm *)', bash('echo "a && rm -rf x"'))).toBe(false); // inside quotes: one command
    expect(matches('Bash(git log:*)', bash('git log && rm -rf x'), 'allow')).toBe(false);
    expect(matches('Bash(git log:*)', bash('git log --oneline'), 'allow')).toBe(true);
  });

  it('Edit/Read paths: //absolute, /relative and ./relative to the session folder, bare names at any depth; Edit covers Write', () => {
    expect(matches('Edit(//etc/**)', file('Edit', '/etc/passwd'))).toBe(true);
    expect(matches('Edit(//etc/**)', file('Write', '/etc/ssh/sshd_config'))).toBe(true);
    expect(matches('Edit(//etc/**)', file('Edit', '/home/etc/x'))).toBe(false);
    expect(matches('Edit(/src/**)', file('Edit', '/srv/proj/src/a/b.ts'))).toBe(true);
    expect(matches('Edit(/src/**)', file('Edit', 'src/a.ts'))).toBe(true); // relative tool paths resolve against the session folder
    expect(matches('Edit(/src/**)', file('Edit', '/src/a.ts'))).toBe(false); // "/" is the session folder, not the root
    expect(matches('Edit(./src/*.ts)', file('MultiEdit', '/srv/proj/src/a.ts'))).toBe(true);
    expect(matches('Edit(./src/*.ts)', file('Edit', '/srv/proj/src/deep/a.ts'))).toBe(false);
    expect(matches('Read(.env)', file('Read', '/srv/proj/pkg/.env'))).toBe(true);
    expect(matches('Read(*.pem)', file('Read', '/srv/proj/keys/server.pem'))).toBe(true);
    expect(matches('Read(*.pem)', file('Read', '/elsewhere/server.pem'))).toBe(false);
    expect(matches('Read(/secrets)', file('Read', '/srv/proj/secrets/token'))).toBe(true); // a folder covers its contents
    expect(matches('Read(//etc/**)', { tool: 'Grep', input: { pattern: 'x', path: '/etc' }, cwd: CWD })).toBe(true);
  });

  it('paths cannot climb out of a rule by spelling', () => {
    expect(matches('Edit(//etc/**)', file('Edit', '/srv/../etc/passwd'))).toBe(true);
    expect(matches('Edit(/src/**)', file('Edit', '/srv/proj/src/../../other/x'))).toBe(false);
    expect(matches('Read(//etc/**)', file('Read', '//etc//./passwd'))).toBe(true);
  });

  it('MCP tools: mcp__server matches all its tools, mcp__server__tool one', () => {
    const mcp = (tool: string) => ({ tool, input: {}, cwd: CWD });
    expect(matches('mcp__github', mcp('mcp__github__create_issue'))).toBe(true);
    expect(matches('mcp__github__*', mcp('mcp__github__create_issue'))).toBe(true);
    expect(matches('mcp__github', mcp('mcp__githubx__a'))).toBe(false);
    expect(matches('mcp__github__create_issue', mcp('mcp__github__create_issue'))).toBe(true);
    expect(matches('mcp__github__create_issue', mcp('mcp__github__delete_repo'))).toBe(false);
  });

  it('WebFetch(domain:…) and Task(name)', () => {
    expect(matches('WebFetch(domain:example.com)', { tool: 'WebFetch', input: { url: 'https://example.com/x' }, cwd: CWD })).toBe(true);
    expect(matches('WebFetch(domain:example.com)', { tool: 'WebFetch', input: { url: 'https://evil.example.com.io/' }, cwd: CWD })).toBe(
      false,
    );
    expect(matches('WebFetch(domain:*.example.com)', { tool: 'WebFetch', input: { url: 'https://api.example.com/' }, cwd: CWD })).toBe(
      true,
    );
    expect(matches('Task(reviewer)', { tool: 'Task', input: { subagent_type: 'reviewer' }, cwd: CWD })).toBe(true);
  });

  it('forms we do not support are refused with why, never silently ignored', () => {
    for (const [rule, why] of [
      ['Read(~/.ssh/**)', 'home folder'],
      ['Bash(npm:* x:*)', 'legacy'],
      ['Write(param:value)', 'not supported'],
      ['mcp__a(x)', 'no specifier'],
      ['Bash()', 'empty'],
      ['1tool', 'not a tool name'],
      ['WebFetch(example.com)', 'domain:'],
    ] as const) {
      expect(() => parseRule(rule), rule).toThrow(RuleError);
      expect(() => parseRule(rule), rule).toThrow(why);
    }
  });
});

describe('the policy: order, ceilings, models, roots', () => {
  const policy = Policy.compile({
    permissions: { deny: ['Bash(rm *)'], ask: ['Bash(git push:*)', 'Read(/private/**)'], allow: ['Bash', 'Read'] },
    maxPermissionMode: { '*': 'default', control: 'acceptEdits', admin: 'bypassPermissions' },
    models: ['claude-sonnet-4-5', 'claude-haiku-*'],
    workingFolders: { '*': ['/srv/space'], special: ['/opt/special'] },
  });

  it('deny, then ask, then the mode (bypassPermissions skips allow rules), then allow', () => {
    expect(policy.decide(bash('rm -rf /'), 'default')).toEqual({ decision: 'deny', rule: 'Bash(rm *)' });
    expect(policy.decide(bash('rm -rf /'), 'bypassPermissions')).toEqual({ decision: 'deny', rule: 'Bash(rm *)' });
    expect(policy.decide(bash('git push origin'), 'acceptEdits')).toEqual({ decision: 'ask', rule: 'Bash(git push:*)' });
    expect(policy.decide(bash('ls'), 'default')).toEqual({ decision: 'allow', rule: 'Bash' });
    expect(policy.decide(bash('ls'), 'bypassPermissions')).toEqual({ decision: 'none' });
    expect(policy.decide(bash('ls'), 'plan')).toEqual({ decision: 'none' }); // an allow rule never lets a call past plan mode
    expect(policy.decide(bash('rm x'), 'plan')).toEqual({ decision: 'deny', rule: 'Bash(rm *)' });
    expect(policy.decide(file('Edit', '/srv/proj/x'), 'default')).toEqual({ decision: 'none' });
  });

  it('a ceiling is the highest of the keys the client holds; refusals name the rule', () => {
    const viewer = { canCreate: false, canControl: false, canAdmin: false };
    const controller = { canCreate: true, canControl: true, canAdmin: false };
    const admin = { canCreate: true, canControl: true, canAdmin: true };
    expect(thrownBy(() => policy.checkMode('acceptEdits', viewer))?.message).toContain('maxPermissionMode.* = default');
    expect(thrownBy(() => policy.checkMode('acceptEdits', controller))).toBeUndefined();
    expect(thrownBy(() => policy.checkMode('bypassPermissions', controller))?.message).toContain('maxPermissionMode.control = acceptEdits');
    expect(thrownBy(() => policy.checkMode('bypassPermissions', admin))).toBeUndefined();
    expect(thrownBy(() => policy.checkMode('plan', viewer))).toBeUndefined();
    expect(
      thrownBy(() => checkControlRequest(policy, { subtype: 'set_permission_mode', mode: 'bypassPermissions' }, controller))?.code,
    ).toBe('PERMISSION_DENIED');
    expect(
      thrownBy(() =>
        checkControlRequest(
          policy,
          { subtype: 'apply_flag_settings', settings: { permissions: { defaultMode: 'bypassPermissions' } } },
          controller,
        ),
      )?.code,
    ).toBe('PERMISSION_DENIED');
    expect(
      thrownBy(() =>
        checkSessionOptions(policy, 'a', { cwd: '/srv/space', extra_args: ['--permission-mode=bypassPermissions'] }, controller),
      )?.code,
    ).toBe('PERMISSION_DENIED');
  });

  it('host requests that skip the hook (mcp_call, read_file) are refused when a deny or ask rule covers them', () => {
    const p = Policy.compile({ permissions: { deny: ['mcp__prod'], ask: ['Read(/private/**)'] } });
    const admin = { canCreate: true, canControl: true, canAdmin: true };
    expect(thrownBy(() => checkControlRequest(p, { subtype: 'mcp_call', tool: 'mcp__prod__drop', arguments: {} }, admin))?.message).toBe(
      "mcp_call of mcp__prod__drop is refused: it would bypass the policy's deny rule (policy rule: mcp__prod)",
    );
    expect(thrownBy(() => checkControlRequest(p, { subtype: 'mcp_call', tool: 'mcp__docs__search' }, admin))).toBeUndefined();
    expect(thrownBy(() => checkControlRequest(p, { subtype: 'read_file', path: '/w/private/key' }, admin, '/w'))?.message).toContain(
      'policy rule: Read(/private/**)',
    );
    expect(thrownBy(() => checkControlRequest(p, { subtype: 'read_file', path: '/w/README.md' }, admin, '/w'))).toBeUndefined();
  });

  it('models: on the list (wildcards too), set_model checked, the first named model used when a session names none', () => {
    const admin = { canCreate: true, canControl: true, canAdmin: true };
    expect(thrownBy(() => policy.checkModel('claude-haiku-4-5'))).toBeUndefined();
    expect(thrownBy(() => policy.checkModel('claude-opus-4'))?.message).toContain(
      'policy rule: models = claude-sonnet-4-5, claude-haiku-*',
    );
    expect(thrownBy(() => checkControlRequest(policy, { subtype: 'set_model', model: 'default' }, admin))?.code).toBe('PERMISSION_DENIED');
    expect(
      thrownBy(() => checkSessionOptions(policy, 'a', { cwd: '/srv/space', extra_args: ['--model', 'claude-opus-4'] }, admin))?.code,
    ).toBe('PERMISSION_DENIED');
    expect(checkSessionOptions(policy, 'a', { cwd: '/srv/space' }, admin).model).toBe('claude-sonnet-4-5');
  });

  it('working folders: per agent or "*", absolute, no climbing out', () => {
    expect(thrownBy(() => policy.checkFolder('a', '/srv/space/p'))).toBeUndefined();
    expect(thrownBy(() => policy.checkFolder('a', '/srv/space'))).toBeUndefined();
    expect(thrownBy(() => policy.checkFolder('a', '/srv/spaceship'))?.message).toContain('workingFolders.* = /srv/space');
    expect(thrownBy(() => policy.checkFolder('a', '/srv/space/../../etc'))?.code).toBe('PERMISSION_DENIED');
    expect(thrownBy(() => policy.checkFolder('a', undefined))?.message).toContain('must name an absolute working folder');
    expect(thrownBy(() => policy.checkFolder('special', '/srv/space'))?.message).toContain('workingFolders.special = /opt/special');
  });

  it('a bad file is refused with its path, the key or rule, and why', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tether-policy-unit-'));
    try {
      const path = join(dir, 'p.json');
      const refusal = (text: string) => {
        writeFileSync(path, text);
        return thrownBy(() => readPolicyFile(path));
      };
      expect(refusal('{"permissions": {"deny": ["Bash(rm *)", "Read(~/x)"]}}')?.message).toBe(
        `policy ${path}: permissions.deny[1] "Read(~/x)": "~/" paths name the home folder of the agent's machine, which the gateway does not know: write the absolute path as //home/NAME/…`,
      );
      expect(refusal('{"permissions": {"defaultMode": "bypassPermissions"}}')?.message).toContain(
        `policy ${path}: permissions: Unrecognized key: "defaultMode"`,
      );
      expect(refusal('{"maxPermissionMode": {"admin": "root"}}')?.message).toContain('maxPermissionMode.admin');
      expect(refusal('{"workingFolders": {"a": ["relative"]}}')?.message).toContain(
        'workingFolders.a[0] "relative": must be an absolute path',
      );
      expect(refusal('{"permissions": ')?.message).toContain('not valid JSON or YAML');
      expect(refusal(' \n')?.message).toBe(`policy ${path}: the file is empty (write {} for a policy without rules)`);
      expect(refusal('- a\n- b\n')?.message).toContain(`policy ${path}: (top level):`);
      expect(thrownBy(() => readPolicyFile(join(dir, 'missing.yaml')))?.message).toContain('cannot be read (ENOENT)');
      writeFileSync(path, 'permissions:\n  deny:\n    - Bash(rm *)\nmodels: [claude-sonnet-4-5]\n');
      expect(readPolicyFile(path).decide(bash('rm x'), 'default').decision).toBe('deny');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('reloading the policy file', () => {
  it('sees a swapped symlink (a mounted config map), and skips a change event whose text is unchanged', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tether-policy-watch-'));
    const policy = (() => {
      for (const [v, rule] of [
        ['v1', 'Bash(rm *)'],
        ['v2', 'Bash(curl *)'],
      ]) {
        mkdirSync(join(dir, v));
        writeFileSync(join(dir, v, 'policy.json'), JSON.stringify({ permissions: { deny: [rule] } }));
      }
      symlinkSync(join(dir, 'v1', 'policy.json'), join(dir, 'policy.json'));
      return new FilePolicy(join(dir, 'policy.json')).watch();
    })();
    try {
      expect(policy.current.decide(bash('rm x'), 'default').decision).toBe('deny');
      const reloads: (string | undefined)[] = [];
      const reloaded = new Promise<void>((resolve) => (policy.onReload = (err) => (reloads.push(err?.message), resolve())));
      symlinkSync(join(dir, 'v2', 'policy.json'), join(dir, 'next'));
      renameSync(join(dir, 'next'), join(dir, 'policy.json'));
      await withTimeout(reloaded, 10_000, 'the reload after the symlink swap');
      expect(reloads).toEqual([undefined]);
      expect(policy.current.decide(bash('rm x'), 'default').decision).toBe('none');
      expect(policy.current.decide(bash('curl x'), 'default').decision).toBe('deny');
      policy.reload('file changed', true); // same text: nothing reloaded, nothing reported
      expect(reloads).toHaveLength(1);
      policy.reload('SIGHUP'); // SIGHUP always reloads
      expect(reloads).toHaveLength(2);
    } finally {
      policy.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
