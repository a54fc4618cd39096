import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileAuditLog } from '../gateway/audit/audit-log.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { runTether } from './support/cli.js';

/**
 * Issue 27, item 12: much of an audit record is chosen by clients (a token's sub, a refusal's
 * reason, a control request's subtype, a tool's name). `tether audit` on a terminal prints them
 * without the escape sequences that would retitle the terminal or erase lines, one row per
 * record; --json prints them exactly.
 */
describe('tether audit: client-supplied strings on a terminal', () => {
  const cleanups = cleanupsPerTest();
  const TITLE = '\x1b]0;pwned\x07';
  const ERASE = '\x1b[2K\r';

  it('the table strips ESC, BEL, C1 and bidi controls and keeps each record on one row; --json is the records exactly', async () => {
    const dir = cleanups.tempDir('tether-audit-esc-');
    const file = join(dir.path, 'audit.jsonl');
    const audit = new FileAuditLog(file);
    audit.record({ session_id: 's1', principal: `mallory${TITLE}`, action: 'attach', client_id: 'c1' });
    audit.record({
      session_id: 's1',
      principal: 'mallory',
      action: 'control',
      subtype: `set_model${ERASE}`,
      result: 'refused',
      reason: `no\nTIME  SESSION  forged row${ERASE}`,
    });
    audit.record({
      session_id: 's1',
      principal: 'tether:policy',
      action: 'policy_decision',
      tool: `Bash\x9b2J\u202e`,
      decision: 'deny',
      rule: 'Bash(rm *)',
    });
    audit.close();

    const shown = await runTether(['audit', '--file', file, '--table']);
    expect(shown.stderr).toBe('');
    expect(shown.code).toBe(0);
    expect(shown.stdout).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]/); // only newlines end rows
    const rows = shown.stdout.split('\n').filter(Boolean);
    expect(rows).toHaveLength(4); // the header and one row per record: the reason's newline forged none
    expect(rows[1]).toMatch(/s1\s+mallory0;pwned\s+attach\s+-\s+client_id=c1$/);
    expect(rows[2]).toContain('subtype="set_model\\u001b[2K\\r"'); // JSON-quoted (\r is white space): the escapes as text
    expect(rows[3]).toContain('tool=Bash2J');

    const json = await runTether(['audit', '--file', file, '--json']);
    expect(json.code).toBe(0);
    const records = json.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(records.map((r) => r.principal)).toEqual([`mallory${TITLE}`, 'mallory', 'tether:policy']);
    expect(records[1]).toMatchObject({ subtype: `set_model${ERASE}`, reason: `no\nTIME  SESSION  forged row${ERASE}` });
    expect(records[2].tool).toBe('Bash\x9b2J\u202e');
    expect(json.stdout).not.toContain('\x1b'); // JSON escapes the controls it carries
  });
});
