import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { TetherError } from '../core/errors.js';
import { AUDIT_DEFAULT_LIMIT, AuditRecord, auditMatches, type AuditQuery, type AuditResult } from '../core/protocol/audit.js';

/** Bytes read from the file per system call. */
const READ_CHUNK_BYTES = 64 * 1024;
/** A line longer than this is no record of ours: it is counted corrupt and skipped, not held. */
const MAX_LINE_BYTES = 4 * 1024 * 1024;
/** Corrupt lines named one by one in a scan (the count covers them all). */
const MAX_CORRUPT_NAMED = 20;

/** Where one corrupt line sits: its byte offset, and its line number when the scan began at the top. */
export interface CorruptLine {
  offset: number;
  line?: number;
}

/** A query's answer plus where the corrupt lines are (for the offline reader). */
export interface AuditScan extends AuditResult {
  corrupt: CorruptLine[];
}

/**
 * Reads the audit file and returns the newest `limit` records matching `query`, oldest first.
 * Only the last `maxBytes` of the file are scanned (`truncated` then says older lines were not
 * looked at); a line that is not a complete audit record is counted in `corrupt_lines`, never
 * dropped silently. A missing file is an empty trail; an unreadable one is UNAVAILABLE.
 */
export function scanAuditFile(path: string, query: AuditQuery, maxBytes = Number.POSITIVE_INFINITY): AuditScan {
  const limit = query.limit ?? AUDIT_DEFAULT_LIMIT;
  const scan: AuditScan = { entries: [], corrupt_lines: 0, truncated: false, corrupt: [] };
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return scan;
    throw new TetherError('UNAVAILABLE', `cannot read the audit trail ${path}: ${(err as Error).message}`);
  }
  try {
    const size = fstatSync(fd).size;
    const start = size > maxBytes ? size - maxBytes : 0;
    scan.truncated = start > 0;
    let lineNo = start === 0 ? 0 : undefined;
    const onLine = (offset: number, bytes: Buffer | undefined) => {
      if (lineNo !== undefined) lineNo++;
      const record = bytes && parseRecord(bytes);
      if (record === 'blank') return;
      if (!record) {
        scan.corrupt_lines++;
        if (scan.corrupt.length < MAX_CORRUPT_NAMED) scan.corrupt.push({ offset, line: lineNo });
        return;
      }
      if (!auditMatches(record, query)) return;
      scan.entries.push(record);
      if (scan.entries.length >= 2 * limit) scan.entries = scan.entries.slice(-limit);
    };
    // From a tail, begin one byte early and drop the first (partial) line.
    forEachLine(fd, start === 0 ? 0 : start - 1, size, start > 0, onLine);
  } catch (err) {
    throw err instanceof TetherError ? err : new TetherError('UNAVAILABLE', `cannot read the audit trail ${path}: ${(err as Error).message}`);
  } finally {
    closeSync(fd);
  }
  scan.entries = scan.entries.slice(-limit);
  return scan;
}

/** One line as a record; 'blank' for an empty line; undefined when it is not a record. */
function parseRecord(bytes: Buffer): AuditRecord | 'blank' | undefined {
  if (bytes.length === 0) return 'blank';
  try {
    const parsed = AuditRecord.safeParse(JSON.parse(bytes.toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Calls `onLine` for each newline-separated line from `from` to `to` (the last one even
 * without its newline). Lines over MAX_LINE_BYTES are passed as undefined, never held whole.
 */
function forEachLine(fd: number, from: number, to: number, skipFirst: boolean, onLine: (offset: number, bytes: Buffer | undefined) => void): void {
  const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES);
  let parts: Buffer[] = [];
  let held = 0;
  let tooLong = false;
  let lineStart = from;
  let skipping = skipFirst;
  const finish = () => {
    if (!skipping) onLine(lineStart, tooLong ? undefined : Buffer.concat(parts));
    skipping = false;
    parts = [];
    held = 0;
    tooLong = false;
  };
  for (let pos = from; pos < to; ) {
    const n = readSync(fd, chunk, 0, Math.min(READ_CHUNK_BYTES, to - pos), pos);
    if (n === 0) break;
    let i = 0;
    while (i < n) {
      const nl = chunk.indexOf(0x0a, i);
      const end = nl === -1 || nl >= n ? n : nl;
      if (!tooLong && !skipping) {
        held += end - i;
        if (held > MAX_LINE_BYTES) tooLong = true;
        else parts.push(Buffer.from(chunk.subarray(i, end)));
      }
      if (end === n) break;
      finish();
      i = end + 1;
      lineStart = pos + i;
    }
    pos += n;
  }
  if (held > 0 || tooLong) finish();
}
