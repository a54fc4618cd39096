import { appendFileSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { UsageEntry } from '../../core/protocol/usage.js';

/**
 * Where the usage ledger lives so it survives a gateway restart. Behind this port so a
 * cluster's store can replace the embedded one; every write completes before it returns.
 */
export interface UsageStore {
  readonly kind: string;
  /** Appends one turn's entry (written before it returns). */
  append(entry: UsageEntry): void;
  /** Every entry kept, oldest first (a torn or foreign line is skipped and counted in `damaged`). */
  loadAll(): { entries: UsageEntry[]; damaged: number };
  /** Replaces the ledger with `kept` (retention drops the oldest). */
  rewrite(kept: readonly UsageEntry[]): void;
}

/** No persistence: the ledger lives as long as the process. */
export class MemoryUsageStore implements UsageStore {
  readonly kind = 'memory';
  append(): void {}
  loadAll(): { entries: UsageEntry[]; damaged: number } {
    return { entries: [], damaged: 0 };
  }
  rewrite(): void {}
}

/**
 * The embedded ledger: one JSON line per turn in `file` (mode 0600), appended with one write
 * each; retention rewrites it to a new file renamed over the old one, so a crash leaves the
 * old ledger or the new one.
 */
export class FileUsageStore implements UsageStore {
  readonly kind = 'file';
  constructor(readonly file: string) {}

  append(entry: UsageEntry): void {
    appendFileSync(this.file, JSON.stringify(entry) + '\n', { mode: 0o600 });
  }

  loadAll(): { entries: UsageEntry[]; damaged: number } {
    if (!existsSync(this.file)) return { entries: [], damaged: 0 };
    const entries: UsageEntry[] = [];
    let damaged = 0;
    for (const line of readFileSync(this.file, 'utf8').split('\n')) {
      if (!line) continue;
      let parsed: ReturnType<typeof UsageEntry.safeParse> | undefined;
      try {
        parsed = UsageEntry.safeParse(JSON.parse(line));
      } catch {
        parsed = undefined;
      }
      if (parsed?.success) entries.push(parsed.data);
      else damaged++;
    }
    return { entries, damaged };
  }

  rewrite(kept: readonly UsageEntry[]): void {
    writeFileSync(this.file + '.tmp', kept.map((e) => JSON.stringify(e) + '\n').join(''), { mode: 0o600 });
    renameSync(this.file + '.tmp', this.file);
  }
}
