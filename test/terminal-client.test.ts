import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startRig, type EngineRig } from './support/engines.js';
import { TETHER_BIN } from './support/cli.js';
import { waitFor } from './support/wait.js';

/** Strips ANSI escapes so assertions read the text a person sees. */
const plain = (s: string) => s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]/g, '').replace(/\r/g, '');

/**
 * The interactive client under a real pseudo-terminal (util-linux `script` allocates it):
 * a prompt streams, a permission prompt answered with `y` runs the tool, Ctrl-C interrupts.
 */
describe('terminal client under a pty', () => {
  let rig: EngineRig | undefined;
  let term: ChildProcessWithoutNullStreams | undefined;
  afterEach(async () => {
    term?.kill('SIGKILL');
    await rig?.stop();
    rig = undefined;
  });

  /** `tether chat` under a pty against a demo-engine rig: what it printed, and typing into it. */
  async function chat() {
    rig = await startRig('demo');
    const cmd = `${process.execPath} ${TETHER_BIN} chat --agent test-agent`;
    const t = spawn('script', ['-qfec', cmd, '/dev/null'], {
      env: { ...process.env, TETHER_GATEWAY: rig.stack.url, TETHER_TOKEN: rig.stack.token, TERM: 'xterm' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    term = t;
    let raw = '';
    t.stdout.on('data', (d: Buffer) => (raw += d.toString()));
    const exited = new Promise<number | null>((r) => t.on('exit', (code) => r(code)));
    const see = async (text: string, from = 0, timeoutMs = 10_000) => {
      await waitFor(
        () => plain(raw).indexOf(text, from) >= 0,
        timeoutMs,
        () => `"${text}" on the terminal:\n${plain(raw).slice(-2000)}`,
      );
      return plain(raw).indexOf(text, from) + text.length;
    };
    return { rig, exited, see, type: (s: string) => t.stdin.write(s), screen: () => raw };
  }

  it('streams, asks y/n for Bash, and Ctrl-C interrupts then leaves', async () => {
    const { see, type, exited, screen, rig: r } = await chat();

    let mark = await see('attached to session');
    type('hello terminal\r');
    mark = await see('You said: hello terminal', mark);

    type('create a file\r');
    mark = await see("Bash: echo 'hello from tether' > tether-demo.txt", mark); // the command, not JSON
    mark = await see("Allow Bash: echo 'hello from tether' > tether-demo.txt?", mark);
    expect(plain(screen())).not.toContain('{"command"');
    type('y\r');
    mark = await see('Done: the command ran.', mark);
    expect(existsSync(join(r.cwd, 'tether-demo.txt'))).toBe(true);

    type('a slow long answer please\r');
    mark = await see('Counting slowly: 1, 2', mark);
    type('\x03');
    mark = await see('interrupting', mark);
    mark = await see('turn failed', mark);
    type('\x03');
    await see('leaving; the session keeps running', mark);
    expect(await exited).toBe(130);
    const sessions = await (await r.stack.client()).listSessions();
    expect(sessions[0].state).not.toBe('ended');
  });

  it('lists prompts typed mid-turn as queued above the prompt line; /withdraw takes one back; Ctrl-C twice stops and clears the queue, saying so', async () => {
    const { see, type, screen } = await chat();
    let mark = await see('attached to session');
    type('a slow long answer please\r');
    mark = await see('Counting slowly: 1, 2', mark);
    type('queued slow two\r');
    mark = await see('queued 1. test-user: queued slow two', mark);
    type('queued slow three\r');
    type('queued slow four\r');
    mark = await see('queued 3. test-user: queued slow four', mark);
    type('/withdraw 1\r');
    mark = await see('test-user withdrew a queued prompt', mark);
    mark = await see('queued 1. test-user: queued slow three', mark);
    type('\x03');
    mark = await see('the queued prompts (2) run next', mark);
    mark = await see('test-user> queued slow three', mark); // it left the queue for the transcript
    type('\x03');
    mark = await see('stopping and clearing the queue (1 waiting)', mark);
    mark = await see('stopped by test-user; 1 queued prompt cleared', mark);
    type('after the stop\r');
    await see('You said: after the stop', mark);
    const seen = plain(screen());
    expect(seen).not.toContain('test-user> queued slow two');
    expect(seen).not.toContain('test-user> queued slow four');
  });

  it('keeps what you type out of output that arrives meanwhile, and redraws the prompt below it', async () => {
    const { see, type, screen } = await chat();
    let mark = await see('attached to session');
    type('a slow long answer please\r');
    mark = await see('Counting slowly: 1, 2', mark);
    type('xyz'); // typed while the answer streams, not sent yet
    mark = await see('38, 39.', mark);
    const lines = plain(screen()).split('\n');
    const answer = lines.find((l) => l.includes('Counting slowly'))!;
    expect(answer).not.toContain('xyz'); // the typing did not land inside the streamed line
    await see('> xyz', mark); // the prompt, with what was typed, is drawn again below the output
    type('\r');
    await see('You said: xyz', mark);
  });
});
