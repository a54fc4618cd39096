import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionInfo } from '../core/protocol/methods.js';
import type { GatewayClient } from '../client/gateway-client.js';
import { Agent } from '../agent/agent.js';
import { createWorktree, endWorktree, folderInWorktree } from '../agent/worktree.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { runTether } from './support/cli.js';
import { startRig } from './support/engines.js';
import { startStack } from './support/stack.js';
import { rejectionOf } from './support/items.js';
import { readTurn } from './support/turns.js';
import { eventually } from './support/wait.js';

/**
 * A session in its own git worktree (issue 34): two sessions on one repository edit the same
 * file each in its own checkout with the real CLI; at the end a clean worktree goes and a dirty
 * one stays, listed; every refusal says why; the audit trail says who created and who ended each.
 */

const cleanups = cleanupsPerTest();

const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-C', cwd, ...args], { encoding: 'utf8', timeout: 20_000 }).trim();

/** A session root holding a repository with one commit of `shared.txt`. */
function repoUnderRoot(): { root: string; repo: string } {
  const root = realpathSync(cleanups.tempDir('tether-wt-root-').path);
  const repo = join(root, 'repo');
  mkdirSync(repo);
  git(repo, 'init', '-q', '-b', 'main');
  git(repo, 'config', 'user.email', 'test@example.com');
  git(repo, 'config', 'user.name', 'Test');
  writeFileSync(join(repo, 'shared.txt'), 'base\n');
  mkdirSync(join(repo, 'pkg', 'a'), { recursive: true });
  writeFileSync(join(repo, 'pkg', 'a', 'index.txt'), 'a\n');
  git(repo, 'add', 'shared.txt', 'pkg');
  git(repo, 'commit', '-q', '-m', 'base');
  return { root, repo };
}

const ended = (client: GatewayClient, id: string) =>
  eventually(
    () => client.getSession(id),
    (s) => s.state === 'ended',
    `session ${id} to end`,
    30_000,
  );

describe('sessions in git worktrees, with the real CLI', () => {
  it('two sessions edit the same file each in its worktree; at the end the clean one is removed, the dirty ones kept, listed and audited', async () => {
    const { root, repo } = repoUnderRoot();
    const audit = new MemoryAuditLog();
    const edit = (text: string) => ({
      text: 'Editing.',
      tool_use: { name: 'Bash', input: { command: `printf '${text}\\n' > shared.txt`, description: 'edit shared.txt' } },
    });
    const rig = cleanups.own(
      await startRig(
        'claude',
        { responses: [edit('from A'), { text: 'Done.' }, edit('from B'), { text: 'Done.' }] },
        { audit, agentOptions: { sessionRoots: [root] } },
      ),
    );
    const client = await rig.stack.client();
    const a = await client.createSession({ agent: 'test-agent', options: { cwd: repo, worktree: true } });
    const b = await client.createSession({ agent: 'test-agent', options: { cwd: repo, worktree: { branch: 'feature/b' } } });
    const c = await client.createSession({ agent: 'test-agent', options: { cwd: repo, worktree: true } });
    const wtA = a.info.worktree!;
    const wtB = b.info.worktree!;
    const wtC = c.info.worktree!;
    const head = git(repo, 'rev-parse', 'HEAD');
    expect(wtA).toEqual({
      path: join(repo, '.tether-worktrees', a.id),
      branch: `tether/${a.id.replace(/-/g, '').slice(0, 8)}`,
      base: head,
      repository: repo,
      state: 'active',
    });
    expect(wtB).toMatchObject({ path: join(repo, '.tether-worktrees', b.id), branch: 'feature/b', base: head, state: 'active' });
    expect(git(wtB.path, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('feature/b');

    const allow = (p: { input: Record<string, unknown> }) => ({ behavior: 'allow' as const, updatedInput: p.input });
    await a.sendUserMessage('edit shared.txt');
    const turnA = await readTurn(a, allow, undefined, 60_000);
    expect(turnA.messages.find((m) => m.type === 'system' && m.subtype === 'init')).toMatchObject({ cwd: wtA.path });
    await b.sendUserMessage('edit shared.txt');
    await readTurn(b, allow, undefined, 60_000);
    expect(readFileSync(join(wtA.path, 'shared.txt'), 'utf8')).toBe('from A\n');
    expect(readFileSync(join(wtB.path, 'shared.txt'), 'utf8')).toBe('from B\n');
    expect(readFileSync(join(repo, 'shared.txt'), 'utf8')).toBe('base\n');
    expect(git(repo, 'status', '--porcelain', '--untracked-files=all')).toBe(''); // the main checkout: untouched, the worktrees folder excluded

    await Promise.all([a.stop(), b.stop(), c.stop()]);
    const [endA, endB, endC] = await Promise.all([ended(client, a.id), ended(client, b.id), ended(client, c.id)]);
    expect(endA.worktree).toMatchObject({ path: wtA.path, state: 'kept', reason: '1 changed or untracked file' });
    expect(endB.worktree).toMatchObject({ path: wtB.path, state: 'kept', reason: '1 changed or untracked file' });
    expect(endC.worktree).toMatchObject({ path: wtC.path, state: 'removed' });
    expect(existsSync(wtC.path)).toBe(false);
    expect(git(repo, 'branch', '--list', wtC.branch)).toBe(''); // its branch held nothing: gone too
    expect(readFileSync(join(wtA.path, 'shared.txt'), 'utf8')).toBe('from A\n');
    expect(git(repo, 'branch', '--list', 'feature/b')).toContain('feature/b');
    const listed = git(repo, 'worktree', 'list', '--porcelain');
    expect(listed).toContain(wtA.path);
    expect(listed).not.toContain(wtC.path);

    // `tether worktrees` lists the kept ones (not the removed one).
    const out = await runTether(['worktrees', '--gateway', rig.stack.url, '--agent', 'test-agent', '--json'], {
      env: { TETHER_TOKEN: rig.stack.token },
    });
    expect(out.code, out.stderr).toBe(0);
    const rows = JSON.parse(out.stdout) as SessionInfo[];
    expect(rows.map((s) => [s.id, s.worktree?.state]).sort()).toEqual(
      [
        [a.id, 'kept'],
        [b.id, 'kept'],
      ].sort(),
    );

    const records = (await audit.read({})).entries.filter((e) => e.action.startsWith('worktree_'));
    expect(records.filter((e) => e.action === 'worktree_create').map((e) => [e.session_id, e.principal, e.path])).toEqual(
      expect.arrayContaining([
        [a.id, 'test-user', wtA.path],
        [b.id, 'test-user', wtB.path],
        [c.id, 'test-user', wtC.path],
      ]),
    );
    const ends = Object.fromEntries(records.filter((e) => e.action === 'worktree_end').map((e) => [e.session_id, e]));
    expect(ends[a.id]).toMatchObject({ principal: 'tether', agent: 'test-agent', state: 'kept', branch: wtA.branch });
    expect(ends[c.id]).toMatchObject({ principal: 'tether', agent: 'test-agent', state: 'removed', path: wtC.path });
  }, 180_000);
});

describe('what a worktree create refuses, and why', () => {
  it('a folder outside the roots, a folder that is no repository, a repository whose top is outside the roots, a branch that reads as an option', async () => {
    const { root, repo } = repoUnderRoot();
    const outside = cleanups.tempDir('tether-wt-out-');
    mkdirSync(join(root, 'plain'));
    const other = join(realpathSync(outside.path), 'other');
    mkdirSync(join(other, 'sub'), { recursive: true });
    git(other, 'init', '-q', '-b', 'main');
    const rig = cleanups.own(await startRig('demo', undefined, { agentOptions: { sessionRoots: [root, join(other, 'sub')] } }));
    const client = await rig.stack.client();
    const create = (cwd: string, worktree: unknown) =>
      rejectionOf(client.createSession({ agent: 'test-agent', options: { cwd, worktree: worktree as true } }));

    const out = await create(outside.path, true);
    expect(out.code).toBe('PERMISSION_DENIED');
    expect(out.message).toContain('is outside the folders agent "test-agent" lets sessions use');
    const above = await create(join(other, 'sub'), true); // the folder is inside a root, the repository (where worktrees go) is not
    expect(above.code).toBe('PERMISSION_DENIED');
    expect(above.message).toContain(`its worktrees go in ${join(other, '.tether-worktrees')}`);
    const plain = await create(join(root, 'plain'), true);
    expect(plain.code).toBe('FAILED_PRECONDITION');
    expect(plain.message).toContain(`working folder ${join(root, 'plain')} is not in a git repository`);
    for (const branch of ['--output=x', '-D']) {
      const bad = await create(repo, { branch });
      expect(bad.code, branch).toBe('INVALID_ARGUMENT');
      expect(bad.message, branch).toContain('not starting with "-"');
    }
    const gitSays = await create(repo, { branch: 'a..b' }); // passes our characters, not git's rule
    expect(gitSays.code).toBe('INVALID_ARGUMENT');
    expect(gitSays.message).toContain('worktree branch "a..b" is not a valid git branch name');
    expect(git(repo, 'branch', '--list')).toBe('* main'); // nothing was made on the way
    expect(existsSync(join(repo, '.tether-worktrees'))).toBe(false);
  }, 60_000);

  it('the agent checks a branch itself, before git sees it (a client past the wire schema gets no further)', async () => {
    const { root, repo } = repoUnderRoot();
    const place = { roots: [root], agent: 'test-agent', user: {} };
    for (const branch of ['-D', '--output=x']) {
      const err = await rejectionOf(createWorktree(repo, 'session-1', { branch }, place, false));
      expect(err.code).toBe('INVALID_ARGUMENT');
    }
    const dotted = await rejectionOf(createWorktree(repo, '../escape', true, place, false)); // an id never names a path
    expect(dotted.code).toBe('INVALID_ARGUMENT');
    expect(git(repo, 'branch', '--list')).toBe('* main');
    expect(existsSync(join(repo, '.tether-worktrees'))).toBe(false);
  });
});

describe('the end of a worktree, and its reuse', () => {
  it('a commit beyond the base keeps it and its branch; a resumed session finds its worktree with its base', async () => {
    const { root, repo } = repoUnderRoot();
    const place = { roots: [root], agent: 'test-agent', user: {} };
    const made = await createWorktree(repo, 'session-2', true, place, false);
    expect(made.created).toBe(true);
    const wt = made.worktree;
    const again = await rejectionOf(createWorktree(repo, 'session-2', true, place, false));
    expect(again.code).toBe('ALREADY_EXISTS');
    writeFileSync(join(wt.path, 'new.txt'), 'x');
    git(wt.path, 'add', 'new.txt');
    git(wt.path, '-c', 'user.email=t@example.com', '-c', 'user.name=T', 'commit', '-q', '-m', 'session work');
    const reused = await createWorktree(repo, 'session-2', true, place, true); // an agent restart: same session
    expect(reused).toEqual({ worktree: wt, created: false });
    const end = await endWorktree(wt, {});
    expect(end).toEqual({ ...wt, state: 'kept', reason: `1 commit beyond ${wt.base.slice(0, 12)}` });
    expect(existsSync(wt.path)).toBe(true);
    expect(git(repo, 'branch', '--list', wt.branch)).toContain(wt.branch);
    git(wt.path, 'reset', '-q', '--hard', wt.base); // back to the base: nothing of the session's left
    expect(folderInWorktree(wt, repo)).toBe(wt.path);
    expect(folderInWorktree(wt, join(repo, 'pkg', 'a'))).toBe(join(wt.path, 'pkg', 'a')); // the same place in the worktree
    mkdirSync(join(repo, 'untracked-dir'));
    expect(folderInWorktree(wt, join(repo, 'untracked-dir'))).toBe(wt.path); // not in the checkout: the worktree's top
    expect(await endWorktree(wt, {})).toEqual({ ...wt, state: 'removed', reason: undefined });
    expect(existsSync(wt.path)).toBe(false);
    expect(git(repo, 'branch', '--list', wt.branch)).toBe('');
  });
});

describe('a worktree session across an agent restart', () => {
  it('the next agent process resumes the engine in the same worktree: no second worktree, one create in the audit', async () => {
    const { root, repo } = repoUnderRoot();
    const audit = new MemoryAuditLog();
    const stack = cleanups.own(await startStack({ engine: 'demo', audit, agentOptions: { sessionRoots: [root] } }));
    const client = await stack.client();
    const session = await client.createSession({ agent: 'test-agent', options: { cwd: repo, worktree: true } });
    const wt = session.info.worktree!;
    await stack.agent.drain(0, 2_000); // a graceful restart: the engine stops, the session waits for the next agent process
    const next = new Agent({
      gateway: stack.wsUrl,
      name: 'test-agent',
      token: await stack.mint({ kind: 'agent', sub: 'test-agent' }),
      engine: 'demo',
      sessionRoots: [root],
      eofGraceMs: 2_000,
      termGraceMs: 2_000,
    });
    cleanups.push(() => next.shutdown(2_000));
    await next.start();
    await eventually(
      () => client.getSession(session.id),
      (s) => s.state === 'idle' && s.agent_away_since === undefined,
      'the engine to be resumed',
    );
    await session.sendUserMessage('create a file');
    await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
    expect(existsSync(join(wt.path, 'tether-demo.txt'))).toBe(true); // the new engine works in the same worktree
    expect(git(repo, 'worktree', 'list', '--porcelain').match(/\.tether-worktrees/g)).toHaveLength(1);
    await session.stop();
    const end = await ended(client, session.id);
    expect(end.worktree).toEqual({ ...wt, state: 'kept', reason: '1 changed or untracked file' });
    const records = (await audit.read({ session_id: session.id })).entries.filter((e) => e.action.startsWith('worktree_'));
    expect(records.map((e) => [e.action, e.principal])).toEqual([
      ['worktree_create', 'test-user'],
      ['worktree_end', 'tether'],
    ]);
  }, 60_000);
});
