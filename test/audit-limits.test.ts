/**
 * The audit trail cannot grow at the weakest token's pace (issue 27, item 11): the file rotates
 * by size and keeps a bounded number of files (and none past their retention), `tether audit`
 * and session.audit read across the rotated files in order, and a viewer attaching and
 * detaching in a loop writes a bounded number of records, the rest counted in summaries.
 * Engine: the demo engine (attach and detach never reach an engine).
 */
import { existsSync, mkdtempSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileAuditLog, MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { scanAuditFile } from '../gateway/audit/audit-reader.js';
import { MembershipRateAudit } from '../gateway/audit/audit-rate.js';
import { runTether } from './support/cli.js';
import { startStack } from './support/stack.js';
import { waitFor } from './support/wait.js';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tether-audit-limits-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes `n` numbered records of about 100 bytes each. */
function writeRecords(log: FileAuditLog, from: number, n: number): void {
  for (let i = from; i < from + n; i++) log.record({ session_id: 's1', principal: 'p', action: 'prompt', n: i, pad: 'x'.repeat(40) });
}

describe('audit file rotation', () => {
  it('rotates at the size, keeps N files, and the readers (scan, tether audit --file) read across them in order', async () => {
    const path = join(tempDir(), 'audit.jsonl');
    const log = new FileAuditLog(path, { maxFileBytes: 4096, keepFiles: 3 });
    cleanups.push(() => log.close());
    writeRecords(log, 0, 400); // ~40 KB: about ten files' worth
    for (const f of [path, `${path}.1`, `${path}.2`, `${path}.3`]) {
      expect(existsSync(f)).toBe(true);
      expect(statSync(f).size).toBeLessThanOrEqual(4096);
    }
    expect(existsSync(`${path}.4`)).toBe(false);

    const scan = scanAuditFile(path, { limit: 100_000 });
    const ns = scan.entries.map((e) => e.n as number);
    expect(ns.at(-1)).toBe(399);
    expect(ns).toEqual(Array.from({ length: ns.length }, (_, i) => ns[0] + i)); // oldest first, none missing in between
    expect(ns.length).toBeGreaterThan(60); // four files, not only the live one (~24 records each)

    expect((await log.read({ limit: 100_000 })).entries.map((e) => e.n)).toEqual(ns); // session.audit's read, too

    const cli = await runTether(['audit', '--file', path, '--json', '--limit', '100000']);
    expect(cli.code).toBe(0);
    expect(
      cli.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).n),
    ).toEqual(ns);
  });

  it('removes rotated files older than the retention at the next rotation', () => {
    const path = join(tempDir(), 'audit.jsonl');
    const log = new FileAuditLog(path, { maxFileBytes: 4096, keepFiles: 5, retentionDays: 2 });
    cleanups.push(() => log.close());
    writeRecords(log, 0, 100); // a few rotations
    expect(existsSync(`${path}.2`)).toBe(true);
    const old = new Date(Date.now() - 3 * 86_400_000);
    utimesSync(`${path}.2`, old, old);
    // One rotation: it renames .2 to .3, then removes it by age.
    for (let i = 100, size = statSync(path).size; i < 200 && statSync(path).size >= size; i++) writeRecords(log, i, 1);
    expect(existsSync(`${path}.3`)).toBe(false);
    expect(existsSync(`${path}.2`)).toBe(true); // the younger ones moved up and stayed
  });
});

describe('attach/detach in a loop', () => {
  it('a view-only token attaching and detaching 300 times writes at most 60 records and one summary per action', async () => {
    const audit = new MemoryAuditLog();
    const stack = await startStack({ engine: 'demo', audit });
    cleanups.push(() => stack.stop());
    const owner = await stack.client();
    const session = await owner.createSession({ agent: 'test-agent', options: { cwd: tmpdir() } });
    const viewer = await stack.client({ sub: 'watcher', scopes: ['view'] });
    const LOOPS = 300;
    for (let i = 0; i < LOOPS; i++) await viewer.detach(await viewer.attach(session.id, { readOnly: true }));
    await stack.stop(); // the gateway writes the summaries of the window so far as it closes
    cleanups.pop();

    const mine = (await audit.read({ principal: 'watcher', limit: 100_000 })).entries;
    const single = mine.filter((e) => e.coalesced === undefined);
    const summaries = mine.filter((e) => e.coalesced !== undefined);
    console.log(`[audit-limits] ${2 * LOOPS} attach/detach by a viewer: ${single.length} records and ${summaries.length} summaries`);
    expect(single.length).toBe(60);
    expect(summaries.map((e) => e.action).sort()).toEqual(['attach', 'detach']);
    for (const s of summaries) expect(s).toMatchObject({ session_id: session.id, first: expect.any(String), last: expect.any(String) });
    expect(summaries.find((e) => e.action === 'attach')?.roles).toEqual(['viewer']);
    // Nothing is lost: every attach and detach is either a record or counted in a summary.
    const count = (action: string) =>
      single.filter((e) => e.action === action).length + Number(summaries.find((e) => e.action === action)?.coalesced ?? 0);
    expect(count('attach')).toBe(LOOPS);
    expect(count('detach')).toBe(LOOPS);
    // The owner's own records are untouched by the viewer's budget.
    expect((await audit.read({ principal: 'test-user', action: 'attach' })).entries).toHaveLength(1);
  }, 120_000);
});

describe('the membership rate, window by window', () => {
  it('writes the summary when the window ends, a new window starts afresh, and cut detaches always pass', async () => {
    const inner = new MemoryAuditLog();
    const audit = new MembershipRateAudit(inner, { perWindow: 2, windowMs: 300 });
    cleanups.push(() => audit.flush());
    const attach = () => audit.record({ session_id: 's1', principal: 'v', action: 'attach', role: 'viewer' });
    for (let i = 0; i < 5; i++) attach();
    audit.record({ session_id: 's1', principal: 'v', action: 'detach', cut: 'PERMISSION_DENIED' });
    audit.record({ session_id: 's1', principal: 'v', action: 'prompt' });
    const now = async () => (await inner.read({ principal: 'v' })).entries;
    expect((await now()).map((e) => [e.action, e.coalesced])).toEqual([
      ['attach', undefined],
      ['attach', undefined],
      ['detach', undefined],
      ['prompt', undefined],
    ]);
    await waitFor(async () => (await now()).length === 5, 2_000, 'the summary at the end of the window');
    expect((await now())[4]).toMatchObject({ action: 'attach', coalesced: 3, roles: ['viewer'] });
    await waitFor(
      async () => {
        attach(); // the next window's first two are written one by one again
        return (await now()).filter((e) => e.action === 'attach' && e.coalesced === undefined).length === 4;
      },
      2_000,
      'a new window',
    );
  });
});
