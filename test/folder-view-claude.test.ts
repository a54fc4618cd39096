import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import type { RemoteSession } from '../client/remote-session.js';
import { asTetherError } from '../core/errors.js';
import type { GatewayClient } from '../client/gateway-client.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { startStack, type Stack } from './support/stack.js';
import { readTurn } from './support/turns.js';
import { withTimeout } from './support/wait.js';
import WebSocket from 'ws';
import { runTether } from './support/cli.js';

/**
 * Issue 34: the session folder's view, read by the agent for members of the session. The real
 * CLI and the scripted model edit a git repository the test made; what the library reads
 * (changes, diffs against HEAD and a base, untracked files, files) must equal what `git` run
 * by the test says, paths leading out are refused, caps cut with a reason, and nothing a
 * client names nor the repository's own config makes git run a program.
 */

/** The test's own git, with what would run a program switched off (the repository's config is hostile below); exit 1 is an answer (`diff --no-index`). */
function git(cwd: string, ...args: string[]): string {
  const safe = ['-c', 'core.fsmonitor=false', '-c', 'filter.evil.clean=', '-c', 'filter.evil.process=', '-c', 'core.pager=cat'];
  const r = spawnSync('git', [...safe, '--no-pager', ...args], {
    cwd,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: '1', HOME: cwd, LC_ALL: 'C' },
  });
  if (r.status !== 0 && r.status !== 1) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}
const DIFF = ['--no-color', '--no-ext-diff', '--no-textconv', '--no-renames'];
const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e) => `${asTetherError(e).code}: ${asTetherError(e).message}`,
  );

describe('the session folder view (real CLI)', () => {
  let stack: Stack;
  let fake: FakeAnthropic;
  let agent: Agent;
  let client: GatewayClient;
  let session: RemoteSession;
  let root: TempDir;
  let outside: TempDir;
  let home: TempDir;
  let repo: string;
  const marker = (name: string) => join(outside.path, `marker-${name}`);

  beforeAll(async () => {
    root = makeTempDir('tether-folder-root-');
    outside = makeTempDir('tether-folder-out-');
    home = makeTempDir('tether-folder-home-');
    repo = join(root.path, 'repo');
    mkdirSync(repo);
    writeFileSync(join(outside.path, 'secret.txt'), 'not for members\n');
    git(repo, 'init', '-q', '-b', 'main');
    writeFileSync(join(repo, 'a.txt'), 'one\ntwo\nthree\n');
    writeFileSync(join(repo, 'b.txt'), 'first\n');
    writeFileSync(join(repo, 'logo.bin'), Buffer.from([1, 0, 2, 0, 3]));
    git(repo, 'add', '.');
    git(repo, '-c', 'user.name=T', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'start');
    git(repo, 'branch', 'base');
    writeFileSync(join(repo, 'b.txt'), 'first\nsecond on main\n');
    git(repo, '-c', 'user.name=T', '-c', 'user.email=t@example.com', 'commit', '-q', '-am', 'b grows on main');
    fake = await startFakeAnthropic({
      responses: [
        { text: 'Reading.', tool_use: { id: 'toolu_read', name: 'Read', input: { file_path: join(repo, 'a.txt') } } },
        {
          text: 'Editing.',
          tool_use: { id: 'toolu_edit', name: 'Edit', input: { file_path: join(repo, 'a.txt'), old_string: 'two', new_string: 'TWO' } },
        },
        {
          text: 'Writing.',
          tool_use: { id: 'toolu_write', name: 'Write', input: { file_path: join(repo, 'notes', 'new.txt'), content: 'hello\nworld\n' } },
        },
        { text: 'Done.' },
      ],
    });
    stack = await startStack({ engine: 'demo' });
    agent = new Agent({
      gateway: stack.url,
      name: 'builder',
      token: await stack.mint({ kind: 'agent', sub: 'builder', agent: 'builder' }),
      engine: 'claude',
      engineCommand: claudeBinaryPath(),
      engineEnv: claudeTestEnv({ home: home.path, baseUrl: fake.url }),
      sessionRoots: [root.path],
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
    });
    await agent.start();
    client = await stack.client({ sub: 'alice' });
    session = await client.createSession({ agent: 'builder', options: { cwd: repo, permission_mode: 'acceptEdits' } });
    await session.sendUserMessage('Change two to TWO in a.txt and write notes/new.txt.');
    const turn = await readTurn(session, () => undefined, undefined, 120_000);
    expect(turn.result.is_error).toBe(false);

    // Made after the engine's turn (the CLI runs git itself): a symlink out, a large file, and a
    // repository config and attributes that would run a program at every step of a git read.
    symlinkSync(join(outside.path, 'secret.txt'), join(repo, 'out-link'));
    writeFileSync(join(repo, 'big.txt'), 'x'.repeat(40_000) + '\n');
    for (const name of ['fsmonitor', 'ext', 'textconv', 'filter', 'pager']) {
      const script = join(outside.path, `${name}.sh`);
      writeFileSync(script, `#!/bin/sh\ntr '\\0' ' ' < /proc/$PPID/cmdline >> '${marker(name)}'\ncat\n`);
      chmodSync(script, 0o755);
    }
    writeFileSync(join(repo, '.gitattributes'), '*.txt diff=evil filter=evil\n');
    git(repo, 'config', 'core.fsmonitor', join(outside.path, 'fsmonitor.sh'));
    git(repo, 'config', 'diff.external', join(outside.path, 'ext.sh'));
    git(repo, 'config', 'diff.evil.textconv', join(outside.path, 'textconv.sh'));
    git(repo, 'config', 'filter.evil.clean', join(outside.path, 'filter.sh'));
    git(repo, 'config', 'core.pager', join(outside.path, 'pager.sh'));
  }, 180_000);

  afterAll(async () => {
    await agent?.shutdown(1_000);
    await stack?.stop();
    await fake?.close();
    for (const d of [root, outside, home]) d?.cleanup();
  });

  it('lists the changed files with their counts as git does: the Edit, the Write (untracked), branch and commits', async () => {
    const changes = await session.changes();
    expect(changes.branch).toBe('main');
    expect(changes.head).toBe(git(repo, 'rev-parse', 'HEAD').trim());
    const gitPaths = git(repo, 'status', '--porcelain=v1', '-z', '--untracked-files=all', '--no-renames')
      .split('\0')
      .filter(Boolean)
      .map((r) => r.slice(3))
      .sort();
    expect(changes.files.map((f) => f.path).sort()).toEqual(gitPaths);
    const a = changes.files.find((f) => f.path === 'a.txt');
    expect(a).toMatchObject({ xy: '.M', unstaged: true, staged: false, untracked: false, added: 1, deleted: 1 });
    expect(git(repo, 'diff', '--numstat', ...DIFF, 'HEAD', '--', 'a.txt')).toBe('1\t1\ta.txt\n');
    expect(changes.files.find((f) => f.path === 'notes/new.txt')).toMatchObject({ xy: '??', untracked: true, added: 2, deleted: 0 });
    const commits = await session.commits(5);
    expect(commits.map((c) => c.subject)).toEqual(['b grows on main', 'start']);
    expect(commits[0].hash).toBe(changes.head);
  });

  it("gives one file's diff, and all of them, equal to git diff HEAD; an untracked file as new", async () => {
    const one = await session.diff({ file: 'a.txt' });
    expect(one.patch).toBe(git(repo, 'diff', ...DIFF, 'HEAD', '--', 'a.txt'));
    expect(one.patch).toContain('-two\n+TWO\n');
    expect(one.files).toEqual([{ path: 'a.txt', added: 1, deleted: 1 }]);
    const untracked = await session.diff({ file: 'notes/new.txt' });
    expect(untracked.patch).toBe(git(repo, 'diff', '--no-index', ...DIFF, '--', '/dev/null', 'notes/new.txt'));
    expect(untracked.files).toEqual([{ path: 'notes/new.txt', untracked: true, added: 2, deleted: 0 }]);
    const all = await session.diff();
    expect(all.patch?.startsWith(git(repo, 'diff', ...DIFF, 'HEAD'))).toBe(true);
    expect(all.patch).toContain('+++ b/notes/new.txt');
    expect(all.patch).not.toContain('not for members');
    expect(all.cut).toContain('out-link: leads outside the session folder');
    const stat = await session.diff({ stat: true });
    expect(stat.patch).toBeUndefined();
    expect(stat.files.map((f) => f.path).sort()).toEqual(all.files.map((f) => f.path).sort());
  });

  it('compares with a base branch as git does, names a binary file without sending it', async () => {
    const vsBase = await session.diff({ base: 'base', file: 'b.txt' });
    expect(vsBase.base).toBe('base');
    expect(vsBase.base_commit).toBe(git(repo, 'rev-parse', 'base').trim());
    expect(vsBase.patch).toBe(git(repo, 'diff', ...DIFF, 'base', '--', 'b.txt'));
    expect(vsBase.patch).toContain('+second on main');
    expect((await session.diff({ file: 'b.txt' })).patch).toBe('');
    writeFileSync(join(repo, 'logo.bin'), Buffer.from([9, 0, 9, 0]));
    const bin = await session.diff({ file: 'logo.bin' });
    expect(bin.files).toEqual([{ path: 'logo.bin', binary: true }]);
    expect(bin.patch).toContain('Binary files a/logo.bin and b/logo.bin differ');
    expect(await codeOf(session.diff({ base: 'no-such-branch' }))).toMatch(/^NOT_FOUND: no branch or commit named "no-such-branch"/);
  });

  it('reads files and folders inside the folder only: .. and a symlink out refused, a large file and a large diff cut with the reason', async () => {
    expect(await session.readFile('a.txt')).toMatchObject({ kind: 'file', content: 'one\nTWO\nthree\n', size: 14 });
    const dir = await session.readFile('.');
    expect(dir.kind).toBe('dir');
    expect(dir.entries?.map((e) => e.name)).toEqual(expect.arrayContaining(['a.txt', 'notes', 'out-link', '.git']));
    expect(await codeOf(session.readFile('../../' + outside.path.split('/').pop() + '/secret.txt'))).toMatch(
      /^INVALID_ARGUMENT: .*may not climb out/,
    );
    expect(await codeOf(session.readFile(outside.path + '/secret.txt'))).toMatch(/^INVALID_ARGUMENT: .*relative to the session folder/);
    expect(await codeOf(session.readFile('out-link'))).toMatch(/^PERMISSION_DENIED: path "out-link" leads outside the session folder/);
    const big = await session.readFile('big.txt', 1000);
    expect(big).toMatchObject({ size: 40_001, cut: 'cut at 1000 of 40001 bytes (the read cap)' });
    expect(big.content).toBe('x'.repeat(1000));
    expect((await session.readFile('logo.bin')).binary).toBe(true);
    expect((await session.readFile('logo.bin')).content).toBeUndefined();
    const cutDiff = await session.diff({ maxBytes: 1024 });
    expect(Buffer.byteLength(cutDiff.patch ?? '')).toBeLessThanOrEqual(1024);
    expect(cutDiff.cut).toMatch(/diff cut at \d+ of \d+ bytes \(the diff cap\)/);
  });

  it('lets a viewer read it (a token that may only view), and shows it in the terminal: tether diff [--stat] [--base] [FILE], tether files', async () => {
    const viewer = await (await stack.client({ sub: 'vic', scopes: ['view'] })).attach(session.id, { readOnly: true });
    expect(viewer.role).toBe('viewer');
    expect((await viewer.changes()).files).toEqual((await session.changes()).files);
    expect((await viewer.diff({ file: 'a.txt' })).patch).toContain('+TWO');

    const flags = ['--gateway', stack.url, '--token', await stack.mint({ kind: 'client', sub: 'vic', scopes: ['view'] })];
    const one = await runTether(['diff', session.id, 'a.txt', ...flags], { timeoutMs: 60_000 });
    expect(one).toMatchObject({ code: 0, stderr: '' });
    expect(one.stdout).toBe(git(repo, 'diff', ...DIFF, 'HEAD', '--', 'a.txt'));
    const base = await runTether(['diff', session.id, '--base', 'base', 'b.txt', ...flags], { timeoutMs: 60_000 });
    expect(base.stdout).toBe(git(repo, 'diff', ...DIFF, 'base', '--', 'b.txt'));
    const stat = await runTether(['diff', session.id, '--stat', ...flags], { timeoutMs: 60_000 });
    expect(stat.code).toBe(0);
    expect(stat.stdout).toMatch(/^on branch main, compared with HEAD \([0-9a-f]{12}\)\n/);
    expect(stat.stdout).toContain('+1 -1        a.txt\n');
    expect(stat.stdout).toContain('+2 -0        notes/new.txt (untracked)\n');
    expect(stat.stdout).toMatch(/\d+ files changed, \d+ insertions\(\+\), \d+ deletions?\(-\)\n$/);
    expect(stat.stderr).toContain('out-link: leads outside the session folder');
    const smuggled = await runTether(['diff', session.id, '--base=--output=/tmp/tether-smuggled', ...flags], { timeoutMs: 60_000 });
    expect(smuggled.code).not.toBe(0);
    expect(smuggled.stderr).toContain('ref "--output=/tmp/tether-smuggled"');
    expect(existsSync('/tmp/tether-smuggled')).toBe(false);

    const listed = await runTether(['files', session.id, ...flags], { timeoutMs: 60_000 });
    expect(listed.stdout.split('\n')).toEqual(expect.arrayContaining(['a.txt', 'notes/', 'out-link@']));
    const file = await runTether(['files', session.id, 'notes/new.txt', ...flags], { timeoutMs: 60_000 });
    expect(file).toMatchObject({ code: 0, stdout: 'hello\nworld\n' });
    const out = await runTether(['files', session.id, 'out-link', ...flags], { timeoutMs: 60_000 });
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain('leads outside the session folder');
    const cut = await runTether(['files', session.id, 'big.txt', '--max-bytes', '10', ...flags], { timeoutMs: 60_000 });
    expect(cut).toMatchObject({ code: 0, stdout: 'xxxxxxxxxx', stderr: 'tether files: cut at 10 of 40001 bytes (the read cap)\n' });
    const help = await runTether(['diff', '--help'], { timeoutMs: 30_000 });
    expect(help.stdout).toContain('Usage: tether diff SESSION [--stat] [--base REF] [FILE]');
  }, 120_000);

  it("answers the JSON-RPC dialect's session_folder as the library does, and refuses a bad ref as invalid params", async () => {
    const token = await stack.mint({ kind: 'client', sub: 'vic', scopes: ['view'] });
    const ws = new WebSocket(stack.wsUrl, 'tether-jsonrpc.v1', { headers: { authorization: `Bearer ${token}` } });
    const answers = new Map<number, (m: Record<string, any>) => void>();
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      answers.get(m.id)?.(m);
    });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    let next = 1;
    const call = (method: string, params: unknown) =>
      withTimeout(
        new Promise<Record<string, any>>((resolve) => {
          const id = next++;
          answers.set(id, resolve);
          ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
        }),
        60_000,
        `the answer to ${method}`,
      );
    try {
      await call('initialize', { protocol_version: '1.0' });
      const diff = await call('session_folder', { session_id: session.id, query: { view: 'diff', path: 'a.txt' } });
      expect(diff.result).toEqual(await session.diff({ file: 'a.txt' }));
      const status = await call('session_folder', { session_id: session.id, query: { view: 'status' } });
      expect(status.result.files).toEqual((await session.changes()).files);
      const bad = await call('session_folder', { session_id: session.id, query: { view: 'diff', base: '--ext-diff' } });
      expect(bad.error.code).toBe(-32602);
      expect(bad.error.message).toContain('ref "--ext-diff"');
      const out = await call('session_folder', { session_id: session.id, query: { view: 'file', path: 'out-link' } });
      expect(out.error.message).toContain('leads outside the session folder');
    } finally {
      ws.terminate();
    }
  });

  it('never lets a ref or path reach git as an option, and runs no program the repository config names', async () => {
    const out = join(outside.path, 'smuggled');
    for (const base of [`--output=${out}`, '-c core.pager=touch /tmp/pwned', '--ext-diff', '-p']) {
      expect(await codeOf(session.diff({ base }))).toMatch(/^INVALID_ARGUMENT: .*ref/);
    }
    for (const file of [`--output=${out}`, '-c core.pager=touch /tmp/pwned', '--ext-diff']) {
      expect(await session.diff({ file })).toMatchObject({ files: [], patch: '' }); // a pathspec that names nothing
      expect(await codeOf(session.readFile(file))).toMatch(/^NOT_FOUND: no file/);
    }
    // At the agent too, past the gateway's check: its own ref rule refuses.
    const peer = await client.peer();
    expect(await codeOf(peer.request('session.folder', { session_id: session.id, query: { view: 'diff', base: '--output=x' } }))).toMatch(
      /^INVALID_ARGUMENT/,
    );
    await session.changes();
    await session.diff();
    await session.diff({ base: 'base' });
    await session.commits();
    expect(existsSync(out)).toBe(false);
    expect(existsSync('/tmp/pwned')).toBe(false);
    for (const name of ['fsmonitor', 'ext', 'textconv', 'filter', 'pager'])
      expect(existsSync(marker(name)) && readFileSync(marker(name), 'utf8'), name).toBe(false);
    // The config is live: git as a person runs it would have run the external diff.
    execFileSync('git', ['diff', 'HEAD', '--', 'a.txt'], { cwd: repo, env: { PATH: process.env.PATH, HOME: repo } });
    expect(existsSync(marker('ext'))).toBe(true);
  });
});
