import {
  closeSync,
  existsSync,
  fdatasyncSync,
  fstatSync,
  fsyncSync,
  openSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import { TetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';
import {
  AUDIT_DEFAULT_LIMIT,
  auditMatches,
  type AuditAction,
  type AuditQuery,
  type AuditRecord,
  type AuditResult,
} from '../../core/protocol/audit.js';
import { ensurePrivateDir, openPrivateAppend } from '../../core/util/private-files.js';
import { capStrings, isFlatAndShort } from './audit-cap.js';
import { isoNow } from '../../core/util/iso-now.js';
import { auditFilesOf, scanAuditFileAsync } from './audit-reader.js';

/** One audit record as a caller hands it in: who did what to which session, plus details. */
export interface AuditEntry {
  session_id: string;
  principal: string;
  action: AuditAction;
  [key: string]: unknown;
}

/**
 * Where the gateway records each decision and action on a session, before it takes effect.
 * `record` returns once the record is durable and throws when it is not (FAILED_PRECONDITION:
 * the gateway is not fit to act until its trail is writable again; retrying at once will not
 * help): the caller then does not apply the action (fail closed).
 */
export interface AuditLog {
  record(entry: AuditEntry): void;
  /** The newest records matching the query, oldest first, with what could not be read. */
  read(query: AuditQuery): Promise<AuditResult>;
}

/**
 * The record as written: the time first, then the entry with long strings cut; `cut` (when
 * anything was) names each cut string's path, full length and SHA-256.
 */
export function auditRecordOf(entry: AuditEntry, now?: Date): AuditRecord {
  const time = now ? now.toISOString() : isoNow();
  if (isFlatAndShort(entry)) return { time, ...entry };
  const { value, cut } = capStrings(entry);
  const record = { time, ...(value as AuditEntry) };
  return Object.keys(cut).length ? { ...record, cut } : record;
}

/** Records a {@link MemoryAuditLog} keeps unless told otherwise (the oldest go first). */
export const MEMORY_AUDIT_MAX_ENTRIES = 10_000;

/** Bounded in-memory audit (no file configured: tests, `--audit-log` unset in a library). */
export class MemoryAuditLog implements AuditLog {
  private readonly entries: AuditRecord[] = [];
  constructor(private readonly maxEntries = MEMORY_AUDIT_MAX_ENTRIES) {}
  record(entry: AuditEntry): void {
    this.entries.push(auditRecordOf(entry));
    if (this.entries.length > this.maxEntries) this.entries.shift();
  }
  async read(query: AuditQuery): Promise<AuditResult> {
    const entries = this.entries.filter((e) => auditMatches(e, query)).slice(-(query.limit ?? AUDIT_DEFAULT_LIMIT));
    return { entries, corrupt_lines: 0, truncated: false };
  }
}

/** Largest tail of the audit file one `session.audit` scans (offline reads have no bound). */
export const AUDIT_READ_TAIL_BYTES = 32 * 1024 * 1024;

/** How the audit file rotates (config `audit.*`, docs/deploy.md). */
export interface AuditRotation {
  /** The live file is rotated before a record would take it past this many bytes. */
  maxFileBytes: number;
  /** Rotated files kept (`FILE.1` newest … `FILE.N` oldest); older ones are removed. */
  keepFiles: number;
  /** Rotated files last written more than this many days ago are removed; 0: kept by count only. */
  retentionDays: number;
}

export const AUDIT_ROTATION_DEFAULTS: AuditRotation = { maxFileBytes: 64 * 1024 * 1024, keepFiles: 10, retentionDays: 0 };

/**
 * The audit trail as a file of JSON lines, one record each: mode 0600 in a 0700 folder
 * (created, or an existing looser folder tightened; refused when not ours). Every record is
 * written and flushed to disk (fdatasync) before `record` returns. Before a record would take
 * the file past `maxFileBytes` it is rotated: `FILE.1` … become `FILE.2` …, the file becomes
 * `FILE.1`, a new one is started, and rotated files past `keepFiles` or older than
 * `retentionDays` are removed. Readers read across the rotated files (audit-reader.ts).
 */
export class FileAuditLog implements AuditLog {
  private fd: number | undefined;
  /** Bytes in the live file. */
  private size = 0;
  private readonly rotation: AuditRotation;
  /** The scan in progress: scans run one at a time, so readers cannot pile up CPU work. */
  private scanning: Promise<unknown> = Promise.resolve();

  constructor(
    readonly path: string,
    rotation: Partial<AuditRotation> = {},
    private readonly log?: Logger,
  ) {
    this.rotation = { ...AUDIT_ROTATION_DEFAULTS, ...rotation };
    const dir = ensurePrivateDir(dirname(path));
    this.fd = openPrivateAppend(path);
    this.size = fstatSync(this.fd).size;
    this.endTornLine();
    if (dir.created || this.size === 0) syncFolder(dir.path); // the new file's name is durable too
  }

  /** A line left unfinished by a crash is ended, so the next record starts on its own line. */
  private endTornLine(): void {
    const size = fstatSync(this.fd!).size;
    if (size === 0) return;
    const last = Buffer.alloc(1);
    const readFd = openSync(this.path, 'r');
    try {
      readSync(readFd, last, 0, 1, size - 1);
    } finally {
      closeSync(readFd);
    }
    if (last[0] !== 0x0a) this.write('\n');
  }

  record(entry: AuditEntry): void {
    this.write(JSON.stringify(auditRecordOf(entry)) + '\n');
  }

  private write(text: string): void {
    // Messages name the errno, not the path: they reach clients.
    if (this.fd === undefined) throw new TetherError('FAILED_PRECONDITION', 'the audit trail is closed; the action was not applied');
    const bytes = Buffer.from(text);
    if (this.size > 0 && this.size + bytes.length > this.rotation.maxFileBytes) this.rotate();
    try {
      let done = 0;
      while (done < bytes.length) done += writeSync(this.fd, bytes, done);
      this.size += bytes.length;
      fdatasyncSync(this.fd);
    } catch (err) {
      throw new TetherError(
        'FAILED_PRECONDITION',
        `the audit trail cannot be written (${(err as NodeJS.ErrnoException).code ?? 'write failed'}); the action was not applied`,
      );
    }
  }

  /** Scans the newest AUDIT_READ_TAIL_BYTES, yielding to the event loop as it goes. */
  read(query: AuditQuery): Promise<AuditResult> {
    const scan = this.scanning.then(() => scanAuditFileAsync(this.path, query, AUDIT_READ_TAIL_BYTES));
    this.scanning = scan.catch(() => {});
    return scan.then(({ entries, corrupt_lines, truncated }) => ({ entries, corrupt_lines, truncated }));
  }

  /**
   * Moves the live file to `FILE.1` (the older ones up by one), starts a new one and removes
   * rotated files past the count or the age. A rotation that fails leaves the live file as it
   * was and records go on into it (logged): the trail never stops for want of a rename.
   */
  private rotate(): void {
    const { keepFiles, retentionDays } = this.rotation;
    const files = auditFilesOf(this.path).slice(0, -1); // rotated only, oldest first
    try {
      for (const f of files) {
        const n = Number(f.slice(this.path.length + 1));
        if (n >= keepFiles) unlinkSync(f); // FILE.keepFiles would become FILE.keepFiles+1
      }
      for (let n = keepFiles - 1; n >= 1; n--)
        if (existsSync(`${this.path}.${n}`)) renameSync(`${this.path}.${n}`, `${this.path}.${n + 1}`);
      renameSync(this.path, `${this.path}.1`);
    } catch (err) {
      this.log?.error({ err: String(err) }, 'audit rotation failed; the live file keeps growing');
      return;
    }
    const old = this.fd!;
    this.fd = openPrivateAppend(this.path);
    this.size = 0;
    closeSync(old);
    syncFolder(dirname(this.path));
    if (retentionDays > 0) this.removeOlderThan(Date.now() - retentionDays * 86_400_000);
  }

  private removeOlderThan(cutoffMs: number): void {
    for (const f of auditFilesOf(this.path).slice(0, -1)) {
      try {
        if (statSync(f).mtimeMs < cutoffMs) unlinkSync(f);
      } catch (err) {
        this.log?.warn({ err: String(err) }, 'could not remove an expired audit file');
      }
    }
  }

  /** Closes the file; later records fail (FAILED_PRECONDITION). Idempotent. */
  close(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}

function syncFolder(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Some file systems cannot fsync a folder; the records themselves are still flushed.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Records where the action goes ahead whatever happens (an expiry's deny, a departure, an
 * engine's exit, a failure note): a failed write is logged at error and swallowed.
 */
export function recordQuietly(audit: AuditLog, entry: AuditEntry, log: Logger): void {
  try {
    audit.record(entry);
  } catch (err) {
    log.error({ sessionId: entry.session_id, action: entry.action, err: String(err) }, 'audit write failed');
  }
}

/**
 * Records before an action, for callers that must not apply it otherwise: any failure of the
 * sink (whatever it threw) is logged at error and becomes FAILED_PRECONDITION naming the
 * action that was not applied.
 */
export function recordOrRefuse(audit: AuditLog, entry: AuditEntry, log: Logger): void {
  try {
    audit.record(entry);
  } catch (err) {
    log.error({ sessionId: entry.session_id, action: entry.action, err: String(err) }, 'audit write failed; the action is refused');
    if (err instanceof TetherError && err.code === 'FAILED_PRECONDITION') throw err;
    throw new TetherError(
      'FAILED_PRECONDITION',
      `the audit trail cannot be written (${(err as NodeJS.ErrnoException).code ?? 'sink failed'}); ${entry.action} was not applied`,
    );
  }
}

/** The code of an error that stopped an action after its record, for the failure note. */
export function failureCode(err: unknown): string {
  return err instanceof TetherError ? err.code : 'INTERNAL';
}
