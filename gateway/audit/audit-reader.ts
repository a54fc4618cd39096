import { closeSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { TetherError } from '../../core/errors.js';
import { AUDIT_DEFAULT_LIMIT, AuditRecord, auditMatches, type AuditQuery, type AuditResult } from '../../core/protocol/audit.js';

/** The audit trail's file name inside the state folder (here, not in the gateway's config, so `tether audit` reads it without loading that). */
export const AUDIT_FILE = 'audit.jsonl';

/** Bytes read from the file per system call. */
const READ_CHUNK_BYTES = 64 * 1024;
/** A line longer than this is no record of ours: it is counted corrupt and skipped, not held. */
const MAX_LINE_BYTES = 4 * 1024 * 1024;
/** Corrupt lines named one by one in a scan (the count covers them all). */
const MAX_CORRUPT_NAMED = 20;

/**
 * Where one corrupt line sits: its byte offset, its line number when the scan began at the top
 * of its file, and the file when it is a rotated one (`audit.jsonl.2`), not the live trail.
 */
export interface CorruptLine {
  offset: number;
  line?: number;
  file?: string;
}

/** A query's answer plus where the corrupt lines are (for the offline reader). */
export interface AuditScan extends AuditResult {
  corrupt: CorruptLine[];
}

/** Lines handled between two yields to the event loop in {@link scanAuditFileAsync}. */
const LINES_PER_YIELD = 500;

/**
 * The files of the trail whose live file is `path`, oldest first: its rotated files
 * (`path.N` … `path.1`, gateway/audit/audit-log.ts) then `path` itself, each that exists.
 */
export function auditFilesOf(path: string): string[] {
  const base = basename(path);
  let names: string[];
  try {
    names = readdirSync(dirname(path));
  } catch {
    return [path];
  }
  const rotated = names
    .map((n) => (n.startsWith(`${base}.`) ? /^\d+$/.exec(n.slice(base.length + 1)) : null))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[0]))
    .sort((a, b) => b - a)
    .map((n) => `${path}.${n}`);
  return [...rotated, path];
}

/**
 * Reads the audit trail (the live file `path` and its rotated files, oldest first) and returns
 * the newest `limit` records matching `query`, oldest first. Only the last `maxBytes` of the
 * trail are scanned (`truncated` then says older lines were not looked at); a line that is not
 * a complete audit record is counted in `corrupt_lines`, never dropped silently. A missing file
 * is an empty trail; an unreadable one is UNAVAILABLE.
 * Synchronous: for the offline reader, which has nothing else to do meanwhile.
 */
export function scanAuditFile(path: string, query: AuditQuery, maxBytes = Number.POSITIVE_INFINITY): AuditScan {
  const scanner = new Scanner(query);
  const parts = tailOf(path, maxBytes);
  for (const part of parts)
    withPart(part, scanner, (lines) => {
      for (const [offset, bytes] of lines) scanner.line(offset, bytes);
    });
  return scanner.result(parts.truncated);
}

/** {@link scanAuditFile} for a server: yields to the event loop every few hundred lines. */
export async function scanAuditFileAsync(path: string, query: AuditQuery, maxBytes = Number.POSITIVE_INFINITY): Promise<AuditScan> {
  const scanner = new Scanner(query);
  const parts = tailOf(path, maxBytes);
  let n = 0;
  for (const part of parts) {
    await withPart(part, scanner, async (lines) => {
      for (const [offset, bytes] of lines) {
        scanner.line(offset, bytes);
        if (++n % LINES_PER_YIELD === 0) await new Promise((r) => setImmediate(r));
      }
    });
  }
  return scanner.result(parts.truncated);
}

type LineSource = Generator<[number, Buffer | undefined]>;

/** One file of the trail to scan from `start` (0: the whole file) to `end`. */
interface Part {
  path: string;
  rotated: boolean;
  start: number;
  end: number;
}

/** The parts of the trail within the newest `maxBytes`, oldest first; `truncated` when older bytes are left out. */
function tailOf(path: string, maxBytes: number): Part[] & { truncated: boolean } {
  const files = auditFilesOf(path);
  const parts: Part[] = [];
  let budget = maxBytes;
  let truncated = false;
  for (let i = files.length - 1; i >= 0; i--) {
    let size: number;
    try {
      size = statSync(files[i]).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // rotated away meanwhile, or no trail yet
      throw unreadable(files[i], err);
    }
    if (budget <= 0) {
      truncated ||= size > 0;
      continue;
    }
    const take = Math.min(size, budget);
    budget -= take;
    if (take < size) truncated = true;
    parts.unshift({ path: files[i], rotated: files[i] !== path, start: size - take, end: size });
  }
  return Object.assign(parts, { truncated });
}

/** Opens one part, hands its lines to `run`, closes it; a file rotated away since it was listed is skipped. */
// biome-ignore lint/suspicious/noConfusingVoidType: `run` is sync or async; void is its result either way
function withPart<R extends void | Promise<void>>(part: Part, scanner: Scanner, run: (lines: LineSource) => R): R | void {
  let fd: number;
  try {
    fd = openSync(part.path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw unreadable(part.path, err);
  }
  scanner.beginFile(part.start === 0, part.rotated ? part.path : undefined);
  // From a tail, begin one byte early and drop the first (partial) line.
  const lines = fileLines(fd, part.start === 0 ? 0 : part.start - 1, part.end, part.start > 0);
  let ran: R;
  try {
    ran = run(lines);
  } catch (err) {
    closeSync(fd);
    throw unreadable(part.path, err);
  }
  if (!(ran instanceof Promise)) {
    closeSync(fd);
    return ran;
  }
  return ran.then(undefined, (err: unknown) => Promise.reject(unreadable(part.path, err))).finally(() => closeSync(fd)) as R;
}

function unreadable(path: string, err: unknown): TetherError {
  return err instanceof TetherError
    ? err
    : new TetherError('UNAVAILABLE', `cannot read the audit trail ${path}: ${(err as Error).message}`);
}

/** Keeps the newest `limit` matching records and counts what is not a record. */
class Scanner {
  private entries: AuditRecord[] = [];
  private readonly corrupt: CorruptLine[] = [];
  private corruptLines = 0;
  private lineNo: number | undefined;
  private file: string | undefined;
  private readonly limit: number;

  constructor(private readonly query: AuditQuery) {
    this.limit = query.limit ?? AUDIT_DEFAULT_LIMIT;
  }

  /** The next lines come from this file (a rotated one named), from its top or from a tail. */
  beginFile(fromTop: boolean, rotatedFile: string | undefined): void {
    this.lineNo = fromTop ? 0 : undefined;
    this.file = rotatedFile;
  }

  line(offset: number, bytes: Buffer | undefined): void {
    if (this.lineNo !== undefined) this.lineNo++;
    const record = bytes && parseRecord(bytes);
    if (record === 'blank') return;
    if (!record) {
      this.corruptLines++;
      if (this.corrupt.length < MAX_CORRUPT_NAMED)
        this.corrupt.push({ offset, line: this.lineNo, ...(this.file ? { file: this.file } : {}) });
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
