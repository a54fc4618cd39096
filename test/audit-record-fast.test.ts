/**
 * An audit record of flat, short details (a prompt's, the usual case) is built without walking
 * it: the result must be exactly what the walk (capStrings) gives, and anything the walk would
 * change (a long string, nesting) must still go through it.
 */
import { describe, expect, it } from 'vitest';
import { AUDIT_MAX_STRING_CHARS, capStrings, isFlatAndShort } from '../gateway/audit/audit-cap.js';
import { auditRecordOf, type AuditEntry } from '../gateway/audit/audit-log.js';

const base: AuditEntry = { session_id: 's-1', principal: 'alice', action: 'prompt', client_id: 'c-1', uuid: undefined, chars: 12 };

/** The record as the walk builds it (the definition the shortcut must match). */
const walked = (entry: AuditEntry, now: Date) => {
  const { value, cut } = capStrings(entry);
  const record = { time: now.toISOString(), ...(value as AuditEntry) };
  return Object.keys(cut).length ? { ...record, cut } : record;
};

describe('audit records of flat, short details', () => {
  const now = new Date('2026-12-01T10:00:00.000Z');
  const cases: AuditEntry[] = [
    base,
    { ...base, uuid: 'u-1', ok: true, none: null },
    { ...base, text: 'x'.repeat(AUDIT_MAX_STRING_CHARS) },
    { ...base, text: 'x'.repeat(AUDIT_MAX_STRING_CHARS + 1) },
    { ...base, options: { system_prompt: 'y'.repeat(5000) } },
    { ...base, list: ['a'] },
  ];

  it('are the records the walk builds, key for key and in order', () => {
    for (const entry of cases) {
      const got = auditRecordOf(entry, now);
      expect(got).toStrictEqual(walked(entry, now));
      expect(Object.keys(got)).toEqual(Object.keys(walked(entry, now)));
    }
  });

  it('take the shortcut only when the walk would change nothing', () => {
    expect(cases.map((e) => isFlatAndShort(e))).toEqual([true, true, true, false, false, false]);
    expect(auditRecordOf(cases[3], now).cut).toBeDefined(); // the long string was cut, and said so
  });
});
