import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { demoSessionAt, startRig } from './support/engines.js';
import { isCanUseTool, isResult } from './support/items.js';
import { runTether, TETHER_BIN } from './support/cli.js';
import { waitFor, withTimeout } from './support/wait.js';
import { cleanupsPerTest } from './support/cleanups.js';

/** `tether chat --json` / `tether attach --json`: the scriptable pipe mode. */
describe('pipe mode', () => {
  const cleanups = cleanupsPerTest();

  it('chat --json: engine frames exactly as written, tether events typed, bad lines reported, exit code of the engine', async () => {
    const rig = cleanups.own(await startRig('demo'));
    const input = [
      JSON.stringify({ type: 'user', message: { role: 'user', content: 'hello pipe' }, parent_tool_use_id: null, session_id: 'default' }),
      'this is not json',
      '[1,2]',
      JSON.stringify({ type: 'bogus' }),
    ].join('\n');
    const r = await runTether(['chat', '--agent', 'test-agent', '--json'], {
      env: { TETHER_GATEWAY: rig.stack.url, TETHER_TOKEN: rig.stack.token },
      input: input + '\n',
    });
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>);
    const tether = lines.filter((l) => l.type === 'tether');
    expect(tether.filter((t) => t.subtype === 'error').map((t) => t.input)).toEqual(['line 2', 'line 3', 'line 4']);
    expect(tether.find((t) => t.subtype === 'presence')).toMatchObject({ action: 'attached', role: 'owner' });
    expect(tether.find((t) => t.subtype === 'prompt')?.message).toEqual({ role: 'user', content: 'hello pipe' });
    expect(tether.at(-1)).toMatchObject({ subtype: 'exited', code: 0 });
    const result = lines.find((l) => l.type === 'result');
    expect(result).toMatchObject({ is_error: false });
    expect(String(result!.result)).toContain('You said: hello pipe');
    // That engine lines are printed byte for byte is test/byte-fidelity.test.ts's job: the demo
    // engine writes canonical JSON, so re-serializing could not be seen here.
  });

  it('attach --json --read-only --from-seq: history from that seq, then live; input refused for a viewer', async () => {
    const { rig, session: s } = await demoSessionAt(cleanups, 'first turn', isResult);
    const child = spawn(process.execPath, [TETHER_BIN, 'attach', s.id, '--json', '--read-only', '--from-seq', '3'], {
      env: { ...process.env, TETHER_GATEWAY: rig.stack.url, TETHER_TOKEN: rig.stack.token },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const frames = () =>
      out
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, any>);
    const framesShow = (pred: (f: Record<string, any>[]) => boolean, what: string) => waitFor(() => pred(frames()), 10_000, what);
    await framesShow((f) => f.some((x) => x.type === 'result'), 'the history');
    child.stdin.write(JSON.stringify({ type: 'user', message: { role: 'user', content: 'viewer says hi' } }) + '\n');
    await framesShow((f) => f.some((x) => x.subtype === 'error'), 'the refusal');
    expect(frames().find((x) => x.subtype === 'error')).toMatchObject({ code: 'PERMISSION_DENIED' });
    await s.sendUserMessage('second turn');
    await framesShow((f) => f.filter((x) => x.type === 'result').length === 2, 'the live turn');
    child.kill('SIGINT');
    await withTimeout(new Promise((r) => child.on('exit', r)), 5_000, 'attach to exit');
    const texts = frames()
      .filter((x) => x.type === 'result')
      .map((x) => String(x.result));
    expect(texts[0]).toContain('first turn');
    expect(texts[1]).toContain('second turn');
    expect(frames().some((x) => x.subtype === 'prompt' && x.message?.content === 'viewer says hi')).toBe(false);
  });

  it('sessions --json lists id, agent, owner, state, clients and pending prompts', async () => {
    const { rig, session: s } = await demoSessionAt(cleanups, 'create a file', isCanUseTool);
    const r = await runTether(['sessions', '--json'], { env: { TETHER_GATEWAY: rig.stack.url, TETHER_TOKEN: rig.stack.token } });
    const [row] = JSON.parse(r.stdout) as Record<string, any>[];
    expect(row).toMatchObject({ id: s.id, agent: 'test-agent', state: 'requires_action', pending_prompts: 1 });
    expect(row.owner).toBeTypeOf('string');
    expect(row.clients).toHaveLength(1);
    const audit = await runTether(['audit', s.id], { env: { TETHER_GATEWAY: rig.stack.url, TETHER_TOKEN: rig.stack.token } });
    expect(
      audit.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l).action),
    ).toEqual(['create', 'attach', 'prompt']);
  });
});
