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

/** Lines handled between two yields to the event loop in {@link scanAuditFileAsync}. */
const LINES_PER_YIELD = 500;

/**
 * Reads the audit file and returns the newest `limit` records matching `query`, oldest first.
 * Only the last `maxBytes` of the file are scanned (`truncated` then says older lines were not
 * looked at); a line that is not a complete audit record is counted in `corrupt_lines`, never
 * dropped silently. A missing file is an empty trail; an unreadable one is UNAVAILABLE.
 * Synchronous: for the offline reader, which has nothing else to do meanwhile.
 */
export function scanAuditFile(path: string, query: AuditQuery, maxBytes = Number.POSITIVE_INFINITY): AuditScan {
  return withAuditFile(path, query, maxBytes, (lines, scanner) => {
    for (const [offset, bytes] of lines) scanner.line(offset, bytes);
  }) as AuditScan;
}

/** {@link scanAuditFile} for a server: yields to the event loop every few thousand lines. */
export async function scanAuditFileAsync(path: string, query: AuditQuery, maxBytes = Number.POSITIVE_INFINITY): Promise<AuditScan> {
  return withAuditFile(path, query, maxBytes, async (lines, scanner) => {
    let n = 0;
    for (const [offset, bytes] of lines) {
      scanner.line(offset, bytes);
      if (++n % LINES_PER_YIELD === 0) await new Promise((r) => setImmediate(r));
    }
  });
}

type LineSource = Generator<[number, Buffer | undefined]>;

/** Opens the file, hands its lines (from the tail when it is over `maxBytes`) to `run`, closes it. */
function withAuditFile(path: string, query: AuditQuery, maxBytes: number, run: (lines: LineSource, scanner: Scanner) => void | Promise<void>): AuditScan | Promise<AuditScan> {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Scanner(query, true).result(false);
    throw unreadable(path, err);
  }
  let size: number;
  try {
    size = fstatSync(fd).size;
  } catch (err) {
    closeSync(fd);
    throw unreadable(path, err);
  }
  const start = size > maxBytes ? size - maxBytes : 0;
  const scanner = new Scanner(query, start === 0);
  // From a tail, begin one byte early and drop the first (partial) line.
  const lines = fileLines(fd, start === 0 ? 0 : start - 1, size, start > 0);
  const done = () => scanner.result(start > 0);
  let ran: void | Promise<void>;
  try {
    ran = run(lines, scanner);
  } catch (err) {
    closeSync(fd);
    throw unreadable(path, err);
  }
  if (!(ran instanceof Promise)) {
    closeSync(fd);
    return done();
  }
  return ran.then(done, (err: unknown) => Promise.reject(unreadable(path, err))).finally(() => closeSync(fd));
}

function unreadable(path: string, err: unknown): TetherError {
  return err instanceof TetherError ? err : new TetherError('UNAVAILABLE', `cannot read the audit trail ${path}: ${(err as Error).message}`);
}

/** Keeps the newest `limit` matching records and counts what is not a record. */
class Scanner {
  private entries: AuditRecord[] = [];
  private readonly corrupt: CorruptLine[] = [];
  private corruptLines = 0;
  private lineNo: number | undefined;
  private readonly limit: number;

  constructor(private readonly query: AuditQuery, fromTop: boolean) {
    this.limit = query.limit ?? AUDIT_DEFAULT_LIMIT;
    this.lineNo = fromTop ? 0 : undefined;
  }

  line(offset: number, bytes: Buffer | undefined): void {
    if (this.lineNo !== undefined) this.lineNo++;
    const record = bytes && parseRecord(bytes);
    if (record === 'blank') return;
    if (!record) {
      this.corruptLines++;
      if (this.corrupt.length < MAX_CORRUPT_NAMED) this.corrupt.push({ offset, line: this.lineNo });
      return;
    }
    if (!auditMatches(record, this.query)) return;
    this.entries.push(record);
    if (this.entries.length >= 2 * this.limit) this.entries = this.entries.slice(-this.limit);
  }

  result(truncated: boolean): AuditScan {
    return { entries: this.entries.slice(-this.limit), corrupt_lines: this.corruptLines, truncated, corrupt: this.corrupt };
  }
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
 * Yields `[offset, bytes]` for each newline-separated line from `from` to `to` (the last one
 * even without its newline), skipping the first when `skipFirst`. A line over MAX_LINE_BYTES
 * is yielded as undefined, never held whole.
 */
function* fileLines(fd: number, from: number, to: number, skipFirst: boolean): LineSource {
  const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES);
  let parts: Buffer[] = [];
  let held = 0;
  let tooLong = false;
  let lineStart = from;
  let skipping = skipFirst;
  for (let pos = from; pos < to; ) {
    const n = readSync(fd, chunk, 0, Math.min(READ_CHUNK_BYTES, to - pos), pos);
    if (n === 0) break;
    const lines: [number, Buffer | undefined][] = []; // completed in this chunk: yielded after it is consumed
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
      if (!skipping) lines.push([lineStart, tooLong ? undefined : Buffer.concat(parts)]);
      skipping = false;
      parts = [];
      held = 0;
      tooLong = false;
      i = end + 1;
      lineStart = pos + i;
    }
    pos += n;
    yield* lines;
  }
  if (!skipping && (held > 0 || tooLong)) yield [lineStart, tooLong ? undefined : Buffer.concat(parts)];
}
