import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { TerminalClient } from '../client/terminal-client.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startRig } from './support/engines.js';
import { waitFor } from './support/wait.js';

const touch = (id: string, what: string) => ({
  text: `Touching ${what}.`,
  tool_use: { id, name: 'Bash', input: { command: 'touch out.txt', description: `touch ${what}` } },
});

/**
 * The terminal client's `/rules` and `/unallow N` against the real Claude Code CLI: the owner
 * lists the session's standing rules and withdraws one; the same command then asks again.
 */
describe('terminal client: /rules and /unallow', () => {
  const cleanups = cleanupsPerTest();

  it('lists the rule "a" granted with who granted it; /unallow 1 withdraws it and the same command asks again', async () => {
    const rig = cleanups.own(
      await startRig('claude', {
        responses: [
          touch('toolu_1', 'one'),
          { text: 'One done.' },
          touch('toolu_2', 'two'),
          { text: 'Two done.' },
          touch('toolu_3', 'three'),
          { text: 'Three done.' },
        ],
      }),
    );
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = '';
    output.on('data', (b: Buffer) => (printed += b.toString()));
    const ui = new TerminalClient(session, { input, output, tty: false, self: 'test' });
    const done = ui.run();
    const saw = (text: string | RegExp) =>
      waitFor(() => (typeof text === 'string' ? printed.includes(text) : text.test(printed)), 30_000, `the terminal to print ${text}`);

    input.write('Touch one\n');
    await saw('Allow Bash: touch out.txt?');
    input.write('a\n');
    await saw('One done.');
    input.write('/rules\n');
    const listing = / {2}1\. (Bash\(touch[^)]*\)) \(by (\S+), for everyone\)/; // the owner granted it: for every member's turns
    await saw(listing);
    const rule = listing.exec(printed)![1];
    input.write('Touch two\n');
    await saw('Two done.'); // the rule stands: no question
    expect(printed.split('Allow Bash: touch out.txt?').length).toBe(2);

    input.write('/unallow 2\n');
    await saw('* no rule 2: /rules lists them (1 to 1)');
    input.write('/unallow 1\n');
    await saw(`withdrew ${rule}: it asks again`);
    input.write('/rules\n');
    await saw('* no rules stand for this session');
    input.write('Touch three\n');
    await waitFor(() => printed.split('Allow Bash: touch out.txt?').length === 3, 30_000, 'the question asked again');
    input.write('y\n');
    await saw('Three done.');
    input.write('/quit\n');
    await expect(done).resolves.toBe(0);
  }, 90_000);
});
