import { join } from 'node:path';
import { resolveStateDir } from '../core/auth/state-dir.js';
import { FileAuditLog, type AuditLog } from '../gateway/audit-log.js';
import { FileSessionStore, type SessionStore } from '../gateway/session-store.js';
import type { OptionSpec } from './args.js';

export const STORAGE_FLAGS: OptionSpec = {
  'audit-log': { type: 'string' },
};

export const STORAGE_FLAGS_HELP = `  --audit-log FILE   audit trail, JSON lines (default STATE_DIR/audit.jsonl)`;

/**
 * The gateway's durable state under the state folder: sessions and their history
 * (STATE_DIR/sessions, so they survive a restart) and the audit trail.
 */
export function gatewayStorage(v: Record<string, unknown>): { store: SessionStore; audit: AuditLog; stateDir: string; auditPath: string } {
  const stateDir = resolveStateDir(v['state-dir'] as string | undefined);
  const auditPath = (v['audit-log'] as string | undefined) ?? join(stateDir, 'audit.jsonl');
  return { store: new FileSessionStore(join(stateDir, 'sessions')), audit: new FileAuditLog(auditPath), stateDir, auditPath };
}
