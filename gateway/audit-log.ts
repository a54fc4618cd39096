import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { pino, type Logger } from 'pino';

/** One audit record: who did what to which session. Wire-safe (no tokens, no payload dumps). */
export interface AuditEntry {
  session_id: string;
  principal: string;
  action:
    | 'create'
    | 'attach'
    | 'detach'
    | 'prompt'
    | 'permission_decision'
    | 'control'
    | 'role_change'
    | 'stop'
    | 'ended';
  [key: string]: unknown;
}

/**
 * Where the gateway records who attached, who sent which prompt, who answered which
 * permission prompt with what decision, and mode/model changes. `record` throws when the
 * record could not be written; callers deciding on a permission prompt then fail closed.
 */
export interface AuditLog {
  record(entry: AuditEntry): void;
  /** The newest `limit` entries of one session, oldest first. */
  read(sessionId: string, limit: number): Record<string, unknown>[];
}

/** Bounded in-memory audit (no file configured); keeps the newest entries. */
export class MemoryAuditLog implements AuditLog {
  private readonly entries: Record<string, unknown>[] = [];
  constructor(private readonly maxEntries = 10_000) {}
  record(entry: AuditEntry): void {
    this.entries.push({ time: new Date().toISOString(), ...entry });
    if (this.entries.length > this.maxEntries) this.entries.shift();
  }
  read(sessionId: string, limit: number): Record<string, unknown>[] {
    return this.entries.filter((e) => e.session_id === sessionId).slice(-limit);
  }
}

/** Largest tail of the audit file read back for `tether audit` (older lines are not scanned). */
const READ_TAIL_BYTES = 32 * 1024 * 1024;

/** JSON lines through pino to a file, written synchronously so a decision is on disk first. */
export class FileAuditLog implements AuditLog {
  private readonly logger: Logger;

  constructor(readonly path: string) {
    if (!existsSync(dirname(path))) mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    this.logger = pino(
      { base: null, timestamp: pino.stdTimeFunctions.isoTime, messageKey: 'event', formatters: { level: () => ({}) } },
      pino.destination({ dest: path, sync: true, mkdir: true }),
    );
  }

  record(entry: AuditEntry): void {
    this.logger.info(entry);
  }

  read(sessionId: string, limit: number): Record<string, unknown>[] {
    if (!existsSync(this.path)) return [];
    const size = statSync(this.path).size;
    let text = readFileSync(this.path, 'utf8');
    if (size > READ_TAIL_BYTES) text = text.slice(text.length - READ_TAIL_BYTES);
    const out: Record<string, unknown>[] = [];
    for (const line of text.split('\n')) {
      if (!line.includes(sessionId)) continue;
      try {
        const v = JSON.parse(line) as Record<string, unknown>;
        if (v.session_id === sessionId) out.push(v);
      } catch {
        // a torn last line while another write is in flight
      }
    }
    return out.slice(-limit);
  }
}
