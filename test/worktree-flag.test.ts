import { describe, expect, it } from 'vitest';
import { parseCommand } from '../bin/args.js';
import { chatCommand } from '../bin/commands/chat.js';
import { runCommand } from '../bin/commands/run.js';
import { worktreeOf } from '../bin/worktree-flag.js';
import { rejectionOf } from './support/items.js';

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
