import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { TerminalClient } from '../client/terminal-client.js';
import { startStack, type Stack } from './support/stack.js';
import { waitFor } from './support/wait.js';

/** The terminal client's `/owner NAME` (issue 32): the owner hands the session to a teammate. */
describe('terminal client: /owner', () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it('refuses a principal nobody knows, hands the session to a member, and every member reads who handed it to whom', async () => {
    stack = await startStack({ engine: 'demo' });
    const session = await (await stack.client({ sub: 'alice' })).createSession({ agent: 'test-agent' });
    const bob = await stack.client({ sub: 'bob' });
    await bob.attach(session.id);
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = '';
    output.on('data', (b: Buffer) => (printed += b.toString()));
    const ui = new TerminalClient(session, { input, output, tty: false, self: 'alice' });
    const done = ui.run();
    const saw = (text: string) =>
      waitFor(
        () => printed.includes(text),
        15_000,
        () => `the terminal to print ${text}; it printed:\n${printed}`,
      );

    input.write('/owner mallory\n');
    await saw('mallory is neither a member of session');
    input.write('/owner bob\n');
    await saw('* bob owns this session now; you stay on as a controller');
    await saw('* alice handed the session to bob');
    expect((await bob.getSession(session.id)).owner).toBe('bob');
    input.write('/quit\n');
    await expect(done).resolves.toBe(0);
  }, 60_000);
});
