import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseCommand } from '../bin/args.js';
import { chatCommand } from '../bin/commands/chat.js';
import { runCommand } from '../bin/commands/run.js';
import { worktreeOf } from '../bin/worktree-flag.js';
import { rejectionOf } from './support/items.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { runTether } from './support/cli.js';
import { startRig } from './support/engines.js';

/** `--worktree [BRANCH]` on the commands that create sessions (issue 34). */
describe('--worktree', () => {
  const chat = (...argv: string[]) => worktreeOf(parseCommand(chatCommand, argv).values.worktree);

  it('chat: bare (last or before another flag) asks for a worktree, a following word names its branch', () => {
    expect(chat('--agent', 'a')).toBeUndefined();
    expect(chat('--agent', 'a', '--worktree')).toBe(true);
    expect(chat('--worktree', '--agent', 'a')).toBe(true);
    expect(chat('--worktree', 'feature/x', '--agent', 'a')).toEqual({ branch: 'feature/x' });
    expect(chat('--worktree=fix-1')).toEqual({ branch: 'fix-1' });
  });

  it('run: only --worktree=BRANCH names a branch, so the PROMPT after a bare --worktree stays the prompt', () => {
    const parsed = parseCommand(runCommand, ['--worktree', 'fix', 'the', 'bug']);
    expect(worktreeOf(parsed.values.worktree)).toBe(true);
    expect(parsed.positionals).toEqual(['fix', 'the', 'bug']);
    expect(worktreeOf(parseCommand(runCommand, ['--worktree=b1', 'go']).values.worktree)).toEqual({ branch: 'b1' });
  });

  it('a branch that reads as an option is refused with the reason', async () => {
    const err = await rejectionOf(Promise.resolve().then(() => chat('--worktree=--output=x')));
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.message).toBe('--worktree "--output=x": letters, digits, dot, slash, dash and underscore only, not starting with "-"');
    expect(() => chat('--worktree', '-D')).toThrow(/Unknown option '-D'/); // never taken as its value
  });
});

describe('tether chat --worktree BRANCH, end to end (demo engine)', () => {
  const cleanups = cleanupsPerTest();

  it('the session runs in a worktree on that branch, and its clean worktree is removed when stdin ends', async () => {
    const rig = cleanups.own(await startRig('demo'));
    const repo = realpathSync(rig.cwd);
    const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', timeout: 20_000 }).trim();
    git('init', '-q', '-b', 'main');
    git('-c', 'user.email=t@example.com', '-c', 'user.name=T', 'commit', '-q', '--allow-empty', '-m', 'first');
    const out = await runTether(
      ['chat', '--gateway', rig.stack.url, '--agent', 'test-agent', '--cwd', repo, '--worktree', 'cli/one', '--json'],
      { env: { TETHER_TOKEN: rig.stack.token }, timeoutMs: 60_000 },
    );
    expect(out.code, out.stderr).toBe(0);
    const events = out.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { subtype?: string; worktree?: { path: string; branch: string; state: string } })
      .filter((e) => e.subtype === 'worktree');
    expect(events.map((e) => [e.worktree?.branch, e.worktree?.state])).toEqual([
      ['cli/one', 'active'],
      ['cli/one', 'removed'],
    ]);
    expect(events[0].worktree?.path.startsWith(join(repo, '.tether-worktrees'))).toBe(true);
    expect(existsSync(events[0].worktree!.path)).toBe(false);
    expect(git('branch', '--list', 'cli/one')).toBe('');
  }, 90_000);
});
