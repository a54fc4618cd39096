import { dirname, join } from 'node:path';
import type { Logger } from '../core/logging.js';
import { ensurePrivateDir } from '../core/util/private-files.js';
import { FileAuditLog, type AuditLog } from '../gateway/audit/audit-log.js';
import { FileSessionStore, type SessionStore } from '../gateway/session/session-store.js';
import { HostKeyPins } from '../gateway/door/host-key-pins.js';
import { FilePolicy } from '../gateway/policy/policy-source.js';
import { UsageLedger } from '../gateway/usage/usage-ledger.js';
import { FileUsageStore, MemoryUsageStore } from '../gateway/usage/usage-store.js';

export const STORAGE_FLAGS_HELP = `  --audit-log FILE   audit trail, JSON lines, mode 0600 in a 0700 folder (default STATE_DIR/audit.jsonl);
                     rotated past --audit-max-file-bytes (64 MiB), --audit-keep-files (10) kept
  --policy FILE      central policy, JSON or YAML: permission rules (deny/ask/allow in Claude
                     Code's syntax), maxPermissionMode, models, workingFolders; reloaded when
                     the file changes and on SIGHUP (a bad file is refused, the old policy stays)`;

/** The usage ledger, under the state folder. */
export const USAGE_FILE = 'usage.jsonl';

/** Agents' pinned host keys, under the state folder. */
export const AGENT_HOST_KEYS_FILE = 'agent-host-keys.json';

/**
 * The gateway's durable state under the state folder: sessions and their history
 * (STATE_DIR/sessions, so they survive a restart), the usage ledger (STATE_DIR/usage.jsonl,
 * kept usage.retentionDays; in a cluster, the fleet's stream), the audit trail (auditLog) and the
 * agents' pinned host keys (STATE_DIR/agent-host-keys.json), and the policy file when one is given. The state folder and the audit
 * file's folder are made private (0700) first: created so, tightened when looser (logged at
 * warn), refused (FAILED_PRECONDITION) when another user owns them.
 */
export function gatewayStorage(
  c: {
    stateDir: string;
    auditLog: string;
    audit: { maxFileBytes: number; keepFiles: number; retentionDays: number };
    usage: { retentionDays: number };
    policy?: string;
    /** In a cluster the usage ledger is the fleet's stream (Cluster.shareUsage), not the file. */
    cluster?: string;
  },
  log?: Logger,
): { store: SessionStore; audit: AuditLog; hostKeys: HostKeyPins; usage: UsageLedger; policy?: FilePolicy } {
  for (const dir of new Set([c.stateDir, dirname(c.auditLog)])) {
    const r = ensurePrivateDir(dir);
    if (r.tightenedFrom !== undefined)
      log?.warn({ dir, was: '0' + r.tightenedFrom.toString(8) }, 'state folder was readable by others; tightened to 0700');
  }
  return {
    store: new FileSessionStore(join(c.stateDir, 'sessions')),
    audit: new FileAuditLog(c.auditLog, c.audit, log),
    hostKeys: new HostKeyPins(join(c.stateDir, AGENT_HOST_KEYS_FILE)),
    usage: new UsageLedger(c.cluster ? new MemoryUsageStore() : new FileUsageStore(join(c.stateDir, USAGE_FILE)), {
      retentionDays: c.usage.retentionDays,
      logger: log,
    }),
    policy: c.policy ? new FilePolicy(c.policy, log).watch() : undefined,
  };
}
