import { appendFileSync, chownSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TetherError } from '../core/errors.js';
import { AuditRecord } from '../core/protocol/audit.js';
import { ensurePrivateDir } from '../core/util/private-files.js';
import { FileAuditLog, type AuditEntry, type AuditLog } from '../gateway/audit/audit-log.js';
import { scanAuditFile } from '../gateway/audit/audit-reader.js';
import { startRig, WRITE_FILE, type EngineRig } from './support/engines.js';
import { codeOf, isCanUseTool, isResult, until } from './support/items.js';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import { cleanupsPerTest } from './support/cleanups.js';

/** Every line of the file, parsed (a line that is not JSON fails the test here). */
function fileRecords(path: string): Record<string, any>[] {
  const text = readFileSync(path, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => {
      const v = JSON.parse(line) as Record<string, any>;
      expect(AuditRecord.safeParse(v).success).toBe(true);
      return v;
    });
}

/** A real file audit whose writes can be made to fail (a full disk, a dead mount). */
class BreakableAudit implements AuditLog {
  failing: ((e: AuditEntry) => boolean) | undefined;
  constructor(readonly file: FileAuditLog) {}
  record(e: AuditEntry): void {
    if (this.failing?.(e)) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    this.file.record(e);
  }
  read = (q: Parameters<AuditLog['read']>[0]) => this.file.read(q);
}

describe('audit trail', () => {
  const cleanups = cleanupsPerTest();
  const tempDir = (prefix: string) => cleanups.tempDir(prefix);
  /** A file audit log in a fresh folder, closed after the test; `path` is its file. */
  const auditFile = () => {
    const path = join(tempDir('tether-audit-').path, 'audit.jsonl');
    return { path, file: cleanups.own(new FileAuditLog(path)) };
  };
  async function rig(kind: 'claude' | 'demo', audit: AuditLog): Promise<EngineRig> {
    const r = await startRig(kind, WRITE_FILE[kind].scenario, { audit });
    cleanups.push(() => r.stop());
    return r;
  }

  it('is JSON lines, one record per action, written as it happens, with the options a session was created with (demo engine)', async () => {
    const { path, file } = auditFile();
    const r = await rig('demo', file);
    const client = await r.stack.client();
    const systemPrompt = 'You are careful. '.repeat(400); // 6,800 chars: cut in the record
    const s = await client.createSession({
      agent: 'test-agent',
      options: { cwd: r.cwd, model: 'demo-model', system_prompt: systemPrompt },
    });
    expect(fileRecords(path).map((e) => e.action)).toEqual(['create', 'attach']);

    const it_ = s[Symbol.asyncIterator]();
    await s.sendUserMessage(WRITE_FILE.demo.prompt);
    expect(fileRecords(path).at(-1)).toMatchObject({ action: 'prompt', principal: 'test-user', chars: WRITE_FILE.demo.prompt.length });
    const ask = asPermissionRequest(((await until(it_, isCanUseTool)) as { message: Record<string, unknown> }).message)!;
    await s.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    await until(it_, isResult);
    await s.setModel('demo-other');
    await s.stop();

    const records = fileRecords(path);
    expect(records.map((e) => e.action)).toEqual(['create', 'attach', 'prompt', 'permission_decision', 'control', 'stop', 'ended']);
    for (const e of records) {
      expect(e.session_id).toBe(s.id);
      expect(Date.parse(e.time)).toBeGreaterThan(Date.now() - 60_000);
    }
    const [create] = records;
    expect(create).toMatchObject({
      principal: 'test-user',
      agent: 'test-agent',
      engine: 'demo',
      options: { cwd: r.cwd, model: 'demo-model' },
    });
    expect(create.options.system_prompt).toBe(systemPrompt.slice(0, 1024));
    expect(create.cut).toEqual({
      'options.system_prompt': { chars: systemPrompt.length, sha256: createHash('sha256').update(systemPrompt).digest('hex') },
    });
    expect(records[3]).toMatchObject({ principal: 'test-user', request_id: ask.requestId, behavior: 'allow' });
    expect(records[4]).toMatchObject({ subtype: 'set_model', model: 'demo-other' });
    expect(records[6]).toMatchObject({ principal: 'tether' });
    // What session.audit answers is the same file, read back.
    expect((await s.audit()).map((e) => e.action)).toEqual(records.map((e) => e.action));
  });

  it('each record is on disk before its action takes effect: the state seen at the moment of writing is the state before', async () => {
    const { file } = auditFile();
    const audit = new BreakableAudit(file);
    const r = await rig('demo', audit);
    const seen: string[] = [];
    audit.failing = (e) => {
      const s = r.stack.gateway.directory.get(e.session_id);
      const info = s?.info();
      const what = {
        create: () => `exists=${s !== undefined}`,
        attach: () => `clients=${info!.clients.length}`,
        role_change: () => `role=${info!.clients.find((c) => c.client_id === e.client_id)!.role}`,
        control: () => `subtype=${String(e.subtype)}`,
        prompt: () => `state=${info!.state}`,
        permission_decision: () => `pending=${info!.pending_prompts} file=${existsSync(join(r.cwd, WRITE_FILE.demo.file))}`,
        stop: () => `state=${info!.state}`,
      }[e.action as string];
      if (what) seen.push(`${e.action} ${what()}`);
      return false;
    };
    const owner = await r.stack.client({ sub: 'alice' });
    const s = await owner.createSession({ agent: 'test-agent', options: { cwd: r.cwd } });
    const it_ = s[Symbol.asyncIterator]();
    const guest = await (await r.stack.client({ sub: 'bob' })).attach(s.id);
    await s.setRole(guest.clientId, 'viewer');
    await s.sendUserMessage(WRITE_FILE.demo.prompt);
    const ask = asPermissionRequest(((await until(it_, isCanUseTool)) as { message: Record<string, unknown> }).message)!;
    await s.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    await until(it_, isResult);
    await s.setModel('demo-other');
    await s.stop();
    expect(seen).toEqual([
      'create exists=false',
      'attach clients=0',
      'attach clients=1',
      'role_change role=controller',
      'prompt state=idle',
      'permission_decision pending=1 file=false',
      'control subtype=set_model',
      'stop state=idle',
    ]);
  });

  it('is created 0600 in a 0700 folder; an existing 0755 folder and 0644 file are tightened; a folder owned by someone else is refused', () => {
    const root = tempDir('tether-modes-');
    const fresh = join(root.path, 'new', 'state');
    const a = new FileAuditLog(join(fresh, 'audit.jsonl'));
    a.record({ session_id: 's', principal: 'p', action: 'stop' });
    a.close();
    expect(statSync(fresh).mode & 0o777).toBe(0o700);
    expect(statSync(join(fresh, 'audit.jsonl')).mode & 0o777).toBe(0o600);

    const loose = join(root.path, 'loose');
    mkdirSync(loose, { mode: 0o755 });
    writeFileSync(join(loose, 'audit.jsonl'), '', { mode: 0o644 });
    expect(statSync(loose).mode & 0o777).toBe(0o755);
    new FileAuditLog(join(loose, 'audit.jsonl')).close();
    expect(statSync(loose).mode & 0o777).toBe(0o700);
    expect(statSync(join(loose, 'audit.jsonl')).mode & 0o777).toBe(0o600);

    if (process.getuid?.() !== 0) return; // only root can hand a folder to another user here
    const theirs = join(root.path, 'theirs');
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, 65534, 65534);
    expect(() => ensurePrivateDir(theirs)).toThrow(/owned by uid 65534, not by this user/);
    expect(() => new FileAuditLog(join(theirs, 'audit.jsonl'))).toThrow(expect.objectContaining({ code: 'FAILED_PRECONDITION' }));
    expect(statSync(theirs).mode & 0o777).toBe(0o755);
    expect(existsSync(join(theirs, 'audit.jsonl'))).toBe(false);
  });

  it('fails closed: a decision, a prompt, an attach or a create that cannot be recorded is not applied', async () => {
    const { file } = auditFile();
    const audit = new BreakableAudit(file);
    const r = await rig('demo', audit);
    const owner = await r.stack.client();
    const s = await owner.createSession({ agent: 'test-agent', options: { cwd: r.cwd } });
    const it_ = s[Symbol.asyncIterator]();
    await s.sendUserMessage(WRITE_FILE.demo.prompt);
    const ask = asPermissionRequest(((await until(it_, isCanUseTool)) as { message: Record<string, unknown> }).message)!;

    const afterFailure: SessionItem[] = []; // everything the session streams from here on
    audit.failing = () => true;
    const refused = await s.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }).catch((e: TetherError) => e);
    expect(refused).toMatchObject({
      code: 'FAILED_PRECONDITION',
      message: 'the audit trail cannot be written (ENOSPC); permission_decision was not applied',
    });
    expect(await codeOf(s.sendUserMessage('another'))).toBe('FAILED_PRECONDITION');
    expect(await codeOf(s.setModel('refused-model'))).toBe('FAILED_PRECONDITION');
    const guest = await r.stack.client();
    expect(await codeOf(guest.attach(s.id))).toBe('FAILED_PRECONDITION');
    expect(await codeOf(owner.createSession({ agent: 'test-agent' }))).toBe('FAILED_PRECONDITION');
    const [info] = await owner.listSessions();
    expect(info).toMatchObject({ id: s.id, state: 'requires_action', pending_prompts: 1 });
    expect(info.clients.map((c) => c.principal)).toEqual(['test-user']);
    expect(existsSync(join(r.cwd, WRITE_FILE.demo.file))).toBe(false); // the tool never ran

    audit.failing = undefined; // the disk is back: the same answer now goes through
    await s.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    await until(it_, isResult, afterFailure);
    expect(existsSync(join(r.cwd, WRITE_FILE.demo.file))).toBe(true);
    const decisions = (await s.audit()).filter((e) => e.action === 'permission_decision');
    expect(decisions).toEqual([expect.objectContaining({ request_id: ask.requestId, behavior: 'allow' })]);
    // The refused set_model never reached the engine: the next one is the first it reports.
    await s.setModel('accepted-model');
    await until(it_, (i) => i.kind === 'engine' && JSON.stringify(i.message).includes('accepted-model'), afterFailure);
    expect(afterFailure.some((i) => i.kind === 'engine' && JSON.stringify(i.message).includes('refused-model'))).toBe(false);
    expect(await owner.listSessions()).toHaveLength(1);
  });

  it("records the gateway's own denial when too many prompts are pending", async () => {
    const { file } = auditFile();
    const r = await startRig('demo', undefined, { audit: file, limits: { maxPendingPrompts: 0 } });
    cleanups.push(() => r.stop());
    const s = await (await r.stack.client()).createSession({ agent: 'test-agent', options: { cwd: r.cwd } });
    await s.sendUserMessage(WRITE_FILE.demo.prompt);
    await until(s[Symbol.asyncIterator](), isResult);
    expect((await s.audit()).filter((e) => e.action === 'permission_decision')).toEqual([
      expect.objectContaining({ principal: 'tether:overflow', behavior: 'deny', request_id: expect.any(String) }),
    ]);
    expect(existsSync(join(r.cwd, WRITE_FILE.demo.file))).toBe(false);
  });

  it('session.audit: the owner reads its session, others are refused, an admin reads and filters the whole trail', async () => {
    const { file } = auditFile();
    const r = await rig('demo', file);
    const alice = await r.stack.client({ sub: 'alice' });
    const s = await alice.createSession({ agent: 'test-agent', options: { cwd: r.cwd } });
    const bob = await r.stack.client({ sub: 'bob' });
    const bobIn = await bob.attach(s.id);
    expect(bobIn.role).toBe('controller');
    expect(await codeOf(bobIn.audit())).toBe('PERMISSION_DENIED');
    const stranger = await r.stack.client({ sub: 'carol', scopes: ['agent:elsewhere'] });
    expect(await codeOf((await stranger.peer()).request('session.audit', { session_id: s.id }))).toBe('NOT_FOUND');
    expect(await codeOf((await alice.peer()).request('session.audit', {}))).toBe('PERMISSION_DENIED');
    await s.setRole(bobIn.clientId, 'viewer');
    expect((await s.audit()).map((e) => `${e.principal}:${e.action}`)).toEqual([
      'alice:create',
      'alice:attach',
      'bob:attach',
      'alice:role_change',
    ]);
    expect((await s.audit()).at(-1)).toMatchObject({
      principal: 'alice',
      target_principal: 'bob',
      client_id: bobIn.clientId,
      role: 'viewer',
    });

    const admin = await (await r.stack.client({ sub: 'root', scopes: ['admin'] })).peer();
    expect((await admin.request('session.audit', { principal: 'bob' })).entries.map((e) => e.action)).toEqual(['attach']);
    expect((await admin.request('session.audit', { action: 'create' })).entries.map((e) => e.principal)).toEqual(['alice']);
    expect((await admin.request('session.audit', { limit: 1 })).entries.map((e) => e.action)).toEqual(['role_change']);
  });

  it('session.audit keeps its reply under 8 MiB (the newest records) and says older ones were left out', async () => {
    const state = tempDir('tether-audit-');
    const path = join(state.path, 'audit.jsonl');
    const old = (n: number) =>
      JSON.stringify({
        time: new Date(n).toISOString(),
        session_id: 'old',
        principal: 'alice',
        action: 'prompt',
        note: 'x'.repeat(1000),
        n,
      }) + '\n';
    writeFileSync(path, Array.from({ length: 12_000 }, (_, n) => old(n)).join(''), { mode: 0o600 }); // ~12.5 MB of records
    const file = new FileAuditLog(path);
    cleanups.push(() => file.close());
    const r = await rig('demo', file);
    const admin = await (await r.stack.client({ sub: 'root', scopes: ['admin'] })).peer();
    const got = await admin.request('session.audit', { session_id: 'old', limit: 100_000 });
    expect(got.truncated).toBe(true);
    expect(got.entries.length).toBeGreaterThan(7_000);
    expect(got.entries.length).toBeLessThan(12_000);
    expect(got.entries.at(-1)).toMatchObject({ n: 11_999 });
    expect(Buffer.byteLength(got.entries.map((e) => JSON.stringify(e) + '\n').join(''))).toBeLessThanOrEqual(8 * 1024 * 1024);
  });

  it('a torn last line is ended before the next record; corrupt lines are counted, never skipped silently', () => {
    const state = tempDir('tether-audit-');
    const path = join(state.path, 'audit.jsonl');
    const first = new FileAuditLog(path);
    first.record({ session_id: 's1', principal: 'p', action: 'attach' });
    first.close();
    appendFileSync(path, '{"time":"2026-01-01T00:00:00.000Z","session_id":"s1","princ'); // the gateway died mid-write
    const second = new FileAuditLog(path);
    second.record({ session_id: 's1', principal: 'p', action: 'detach' });
    second.close();
    const scan = scanAuditFile(path, { session_id: 's1' });
    expect(scan.entries.map((e) => e.action)).toEqual(['attach', 'detach']);
    expect(scan.corrupt_lines).toBe(1);
    expect(scan.corrupt).toEqual([{ offset: expect.any(Number), line: 2 }]);
    // Read from a tail that begins inside the torn line: that partial line is not counted.
    const lastLineBytes = readFileSync(path, 'utf8').trimEnd().split('\n').at(-1)!.length + 1;
    const tail = scanAuditFile(path, {}, lastLineBytes + 5);
    expect(tail).toMatchObject({ truncated: true, corrupt_lines: 0, entries: [expect.objectContaining({ action: 'detach' })] });
    // A closed (or failing) file refuses the record with a typed error naming no path.
    expect(() => second.record({ session_id: 's1', principal: 'p', action: 'stop' })).toThrow(
      expect.objectContaining({ code: 'FAILED_PRECONDITION', message: 'the audit trail is closed; the action was not applied' }),
    );
  });

  it('records a real Claude Code permission decision before the tool runs (real CLI)', async () => {
    const { path, file } = auditFile();
    const r = await rig('claude', file);
    const client = await r.stack.client();
    const s = await client.createSession({ agent: 'test-agent', options: { cwd: r.cwd } });
    const it_ = s[Symbol.asyncIterator]();
    await s.sendUserMessage(WRITE_FILE.claude.prompt);
    const ask = asPermissionRequest(((await until(it_, isCanUseTool, [], 30_000)) as { message: Record<string, unknown> }).message)!;
    expect(ask.toolName).toBe('Bash');
    await s.answer(ask.requestId, { behavior: 'deny', message: 'not on this machine' });
    await until(it_, isResult, [], 30_000);
    expect(existsSync(join(r.cwd, WRITE_FILE.claude.file))).toBe(false);
    const records = fileRecords(path);
    expect(records.map((e) => e.action)).toEqual(['create', 'attach', 'prompt', 'permission_decision']);
    expect(records[0]).toMatchObject({ engine: 'claude', options: { cwd: r.cwd } });
    expect(records[3]).toMatchObject({ session_id: s.id, principal: 'test-user', request_id: ask.requestId, behavior: 'deny' });
  });
});
