import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startRig, type EngineRig } from './support/engines.js';
import { TETHER_BIN } from './support/cli.js';

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

  it('streams, asks y/n for Bash, and Ctrl-C interrupts then leaves', async () => {
    rig = await startRig('demo');
    const cmd = `${process.execPath} ${TETHER_BIN} chat --agent test-agent`;
    term = spawn('script', ['-qfec', cmd, '/dev/null'], { env: { ...process.env, TETHER_GATEWAY: rig.stack.url, TETHER_TOKEN: rig.stack.token, TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let screen = '';
    term.stdout.on('data', (d: Buffer) => (screen += d.toString()));
    const exited = new Promise<number | null>((r) => term!.on('exit', (code) => r(code)));
    const see = async (text: string, from = 0, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const at = plain(screen).indexOf(text, from);
        if (at >= 0) return at + text.length;
        if (Date.now() > deadline) throw new Error(`did not see "${text}" on the terminal:\n${plain(screen).slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    const type = (s: string) => term!.stdin.write(s);

    let mark = await see('attached to session');
    type('hello terminal\r');
    mark = await see('You said: hello terminal', mark);

    type('create a file\r');
    mark = await see('Allow Bash(', mark);
    type('y\r');
    mark = await see('Done: the command ran.', mark);
    expect(existsSync(join(rig.cwd, 'tether-demo.txt'))).toBe(true);

    type('a slow long answer please\r');
    mark = await see('Counting slowly: 1, 2', mark);
    type('\x03');
    mark = await see('interrupting', mark);
    mark = await see('turn failed', mark);
    type('\x03');
    await see('leaving; the session keeps running', mark);
    expect(await exited).toBe(130);
    const sessions = await (await rig.stack.client()).listSessions();
    expect(sessions[0].state).not.toBe('ended');
  });
});
