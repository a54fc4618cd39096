import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * `npm run capture` (scripts/capture.mjs) re-records transcripts from the real CLI and the
 * scripted Messages API. Two of them, checked against the stored ones: a plain turn and an
 * allowed Bash call (whose answer needs the new run's request and tool-use ids).
 */
const SCRIPT = fileURLToPath(new URL('../scripts/capture.mjs', import.meta.url));

describe('npm run capture', () => {
  const out = mkdtempSync(join(tmpdir(), 'tether-capture-test-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("re-records 01 and 10 from the real CLI with the stored shape, in the fixtures' format", async () => {
    const r = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [SCRIPT, '--only', '01_basic_text_turn,10_permission_allow', '--check', '--out', out],
        { timeout: 60_000 },
        (err, stdout) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout) }),
      );
      child.stdin?.end();
    });
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toContain('01_basic_text_turn: same shape as stored');
    expect(r.stdout).toContain('10_permission_allow: same shape as stored');
    const lines = readFileSync(join(out, '10_permission_allow.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { dir: string; frame?: Record<string, any> });
    const ask = lines.find((l) => l.dir === 'out' && l.frame?.request?.subtype === 'can_use_tool')!;
    const answer = lines.find((l) => l.dir === 'in' && l.frame?.type === 'control_response')!;
    expect(answer.frame!.response.request_id).toBe(ask.frame!.request_id);
    const meta = JSON.parse(readFileSync(join(out, '10_permission_allow.meta.json'), 'utf8')) as { argv: string[]; exit_code: number };
    expect(meta.argv[0]).toBe('/opt/claude/claude');
    expect(meta.exit_code).toBe(0);
    expect(readFileSync(join(out, '10_permission_allow.ndjson'), 'utf8')).not.toContain(tmpdir() + '/tether-capture-cwd');
    expect(existsSync(join(out, '01_basic_text_turn.meta.json'))).toBe(true);
  }, 90_000);
});
