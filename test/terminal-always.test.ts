import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { TerminalClient } from '../client/terminal-client.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startRig } from './support/engines.js';
import { waitFor } from './support/wait.js';

/**
 * The terminal client's "a" (always, for this session) against the real Claude Code CLI: it
 * grants the rule the engine proposed for the call, named in the question, never the whole tool.
 */
describe('terminal client: always allow for this session', () => {
  const cleanups = cleanupsPerTest();

  it('"a" after an echo | tee grants only the proposed rule: an rm later still asks', async () => {
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
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = '';
    output.on('data', (b: Buffer) => (printed += b.toString()));
    const ui = new TerminalClient(session, { input, output, tty: false, self: 'test' });
    const done = ui.run();
    const saw = (text: string | RegExp) =>
      waitFor(() => (typeof text === 'string' ? printed.includes(text) : text.test(printed)), 30_000, `the terminal to print ${text}`);

    input.write('Log hello\n');
    await saw('Allow Bash: echo hello | tee log.txt?');
    input.write('a\n');
    await saw('Logged.');
    expect(existsSync(join(rig.cwd, 'log.txt'))).toBe(true);
    input.write('Clean up\n');
    await saw('Allow Bash: rm keep.txt?'); // asked again: the rule was for echo, not for Bash
    input.write('n\n');
    await saw('Kept it.');
    expect(existsSync(join(rig.cwd, 'keep.txt'))).toBe(true);
    // The question named the rule before the answer.
    expect(printed).toMatch(
      /Allow Bash: echo hello \| tee log\.txt\? \[y\]es \/ \[n\]o \/ \[a\]lways allow Bash\(echo hello .*\) for this session/,
    );
    input.write('/quit\n');
    await expect(done).resolves.toBe(0);
  }, 60_000);
});
