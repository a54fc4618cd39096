import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseCommand } from '../core/policy/bash-command.js';
import { Policy } from '../core/policy/policy.js';
import { parseRule, type RuleKind, type ToolCall } from '../core/policy/rules.js';

/**
 * Bash rules match the command bash will run, not its text (issue 27, item 7): quoting,
 * escapes, tabs, a path to the program, and commands hidden in lists, substitutions and
 * wrappers do not get past a deny rule; an allow rule applies only to a line fully judged.
 */

const bash = (command: string): ToolCall => ({ tool: 'Bash', input: { command }, cwd: '/srv/proj' });
const matches = (rule: string, command: string, kind: RuleKind = 'deny') => parseRule(rule).matches(bash(command), kind);
const programs = (command: string) => parseCommand(command).commands.map((c) => c.words.join(' '));

describe('a Bash deny rule matches the parsed command', () => {
  it.each([
    `"rm" -rf x`,
    `'rm' -f file`,
    `r\\m -rf x`,
    `\\rm x`,
    `"r"'m' x`,
    `rm\t-rf x`,
    `rm \\\n -rf x`,
    `/bin/rm -f file`,
    `/usr/bin/rm -rf x`,
    `echo ok; rm -f file`,
    `echo ok && rm -f file`,
    `false || rm x`,
    `ls | rm x`,
    `echo ok & rm x`,
    `echo $(rm b)`,
    'echo `rm b`',
    `echo "a $(rm c)"`,
    `x=1 rm b`,
    `(rm b)`,
    `{ rm b; }`,
    `if true; then rm b; fi`,
    `for i in 1; do rm $i; done`,
    `cat <(rm b)`,
    `A=$(rm q)`,
    `export A=$(rm q)`,
    `sudo rm -rf /`,
    `sudo -u bob rm x`,
    `env X=1 rm x`,
    `timeout 5 rm x`,
    `ls | xargs rm`,
    `command rm x`,
    `sh -c 'rm x'`,
    `bash -lc "echo; rm x"`,
    `eval 'rm x'`,
    `sudo bash -c 'rm x'`,
  ])('Bash(rm:*) and Bash(rm *) deny %j', (command) => {
    expect(matches('Bash(rm:*)', command)).toBe(true);
    expect(matches('Bash(rm *)', command)).toBe(true);
  });

  it('words inside quotes are one word and no command: no false match', () => {
    expect(matches('Bash(rm *)', `echo "a && rm -rf x"`)).toBe(false);
    expect(matches('Bash(rm *)', `echo 'rm x'`)).toBe(false);
    expect(matches('Bash(rm *)', `rmdir x`)).toBe(false);
    expect(matches('Bash(rm *)', `git commit -m "rm x"`)).toBe(false);
    expect(programs(`echo 'x;y' "a|b" c\\;d`)).toEqual(['echo x;y a|b c;d']);
    expect(programs(`a && b || c; d | e\nf & g`)).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g']);
  });

  it('property: however rm and its arguments are quoted, escaped, spaced or pathed, Bash(rm:*) denies it', () => {
    const quoted = (word: string) =>
      fc
        .array(fc.constantFrom<'plain' | 'single' | 'double' | 'escaped'>('plain', 'single', 'double', 'escaped'), {
          minLength: word.length,
          maxLength: word.length,
        })
        .map((how) =>
          [...word]
            .map((ch, i) => (how[i] === 'single' ? `'${ch}'` : how[i] === 'double' ? `"${ch}"` : how[i] === 'escaped' ? `\\${ch}` : ch))
            .join(''),
        );
    const gap = fc.array(fc.constantFrom(' ', '\t', ' \\\n'), { minLength: 1, maxLength: 3 }).map((g) => g.join(''));
    const before = fc.constantFrom('', 'echo ok; ', 'true && ', 'false || ', 'ls | ', 'X=1 ', 'sudo ', 'env A=b ', '( ', 'echo $( ');
    fc.assert(
      fc.property(
        before,
        fc.constantFrom('', '/bin/', '/usr/bin/'),
        quoted('rm'),
        gap,
        quoted('-rf'),
        gap,
        quoted('x'),
        (pre, path, rm, g1, flag, g2, target) => {
          const close = pre.endsWith('( ') ? ' )' : '';
          const command = `${pre}${path}${rm}${g1}${flag}${g2}${target}${close}`;
          expect(matches('Bash(rm:*)', command), command).toBe(true);
          expect(matches('Bash(rm -rf:*)', command), command).toBe(true);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('a rule with arguments matches the unquoted words', () => {
    expect(matches('Bash(git push:*)', `git "push" --force`)).toBe(true);
    expect(matches('Bash(git push:*)', `git\tpush origin`)).toBe(true);
    expect(matches('Bash(git push:*)', `/usr/bin/git push`)).toBe(true);
    expect(matches('Bash(rm -rf:*)', `rm '-rf' /`)).toBe(true);
  });
});

describe('forms the review found past a deny rule (issue 27 follow-up)', () => {
  it.each([
    `$'rm' -rf x`,
    `$'r\\x6d' x`,
    `$'\\162\\155' x`,
    `r$'m' x`,
    `busybox rm -rf x`,
    `/bin/busybox rm x`,
    `busybox sh -c 'rm x'`,
    `toybox rm x`,
    `script -c 'rm -rf x' /dev/null`,
    `script -qc "rm x" /dev/null`,
    `script --command 'rm x'`,
    `script --command='rm x'`,
    `trap 'rm -rf x' EXIT`,
    `trap -- 'rm x' INT TERM`,
    `~/bin/rm x`,
    `~bob/bin/rm x`,
    `$HOME/bin/rm x`,
    `"$HOME"/bin/rm x`,
    `sudo ~/bin/rm x`,
  ])('Bash(rm:*) denies %j', (command) => {
    expect(matches('Bash(rm:*)', command)).toBe(true);
    if (command.includes('-rf')) expect(matches('Bash(rm -rf:*)', command)).toBe(true);
  });

  it('no false match: a trap that lists, a name that is not rm, a path built by an expansion after the slash', () => {
    expect(matches('Bash(rm:*)', `trap -p EXIT`)).toBe(false);
    expect(matches('Bash(rm:*)', `trap 'echo bye' EXIT`)).toBe(false);
    expect(matches('Bash(rm:*)', `~/bin/rmdir x`)).toBe(false);
    expect(matches('Bash(rm:*)', `script -c 'echo rm' /dev/null`)).toBe(false);
    expect(parseCommand(`~/bin/$X y`).commands[0].name).toBeUndefined();
    expect(parseCommand(`~/bin/r* y`).commands[0].name).toBeUndefined();
  });

  it("a program under ~ or $HOME is still not judged for allow rules; $'…' is an ordinary quote", () => {
    expect(matches('Bash(~/bin/ls:*)', `~/bin/ls`, 'allow')).toBe(false);
    expect(matches('Bash(echo *)', `$'echo' hi`, 'allow')).toBe(true);
    expect(programs(`echo $'a\\tb\\'c'`)).toEqual(["echo a\tb'c"]);
  });
});

describe('a Bash allow rule applies only when every command is allowed and the line is judged', () => {
  const allow = (rule: string, command: string) => matches(rule, command, 'allow');
  it('every simple command, nested ones too, must match as written', () => {
    expect(allow('Bash(echo *)', `echo hi > made.txt`)).toBe(true);
    expect(allow('Bash(echo *)', `echo "a b"; echo c`)).toBe(true);
    expect(allow('Bash(echo *)', `echo $HOME`)).toBe(true); // an expanded argument, a literal program
    expect(allow('Bash(echo *)', `echo $(rm b)`)).toBe(false);
    expect(allow('Bash(echo *)', 'echo `rm b`')).toBe(false);
    expect(allow('Bash(echo *)', `echo a | rm b`)).toBe(false);
    expect(allow('Bash(git log:*)', `git log && rm -rf x`)).toBe(false);
    expect(allow('Bash(git status)', `/tmp/x/git status`)).toBe(false); // a path is another program
  });

  it.each([
    ['an expansion as the program', 'Bash(echo *)', `X=rm; $X -rf /`],
    ['a glob as the program', 'Bash(echo *)', `/bin/e?ho x`],
    ['eval of a variable', 'Bash(eval:*)', `eval "$CMD"`],
    ['sh -c of a variable', 'Bash(sh:*)', `sh -c "$CMD"`],
    ['a shell reading its input', 'Bash(echo *)', `echo rm x | bash`],
    ['a function', 'Bash(ls *)', `ls() { :; }; ls`],
    ['an alias', 'Bash(alias:*)', `alias ls='rm -rf'`],
    ['source', 'Bash(source:*)', `source ./x.sh`],
    ['a parse error', 'Bash(echo *)', `echo "unterminated`],
  ])('%s makes an allow rule not apply', (_what, rule, command) => {
    expect(allow(rule, command)).toBe(false);
    expect(parseCommand(command).unjudgeable).toBeTruthy();
  });

  it('a wrapper is allowed only by a rule for the whole line, and what it wraps still meets deny rules', () => {
    const p = Policy.compile({ permissions: { deny: ['Bash(rm:*)'], allow: ['Bash(sudo apt update)', 'Bash(timeout:*)'] } });
    expect(p.decide(bash('sudo apt update'), 'default')).toEqual({ decision: 'allow', rule: 'Bash(sudo apt update)' });
    expect(p.decide(bash('sudo rm x'), 'default')).toEqual({ decision: 'deny', rule: 'Bash(rm:*)' });
    expect(p.decide(bash('timeout 5 /bin/rm x'), 'default')).toEqual({ decision: 'deny', rule: 'Bash(rm:*)' });
    expect(p.decide(bash(`sudo bash -c 'ls'`), 'default')).toEqual({ decision: 'none' }); // ls under a shell needs its own allow
  });
});

describe('parse errors', () => {
  it('say where bash would stop', () => {
    expect(parseCommand(`echo "x`).unjudgeable).toMatch(/does not parse as bash \(.*1:6: reached EOF without closing quote/);
  });
});
