import { join } from 'node:path';
import { FileAuditLog, type AuditLog } from '../gateway/audit-log.js';
import { FileSessionStore, type SessionStore } from '../gateway/session-store.js';

export const STORAGE_FLAGS_HELP = `  --audit-log FILE   audit trail, JSON lines (default STATE_DIR/audit.jsonl)`;

/**
 * The gateway's durable state under the state folder: sessions and their history
 * (STATE_DIR/sessions, so they survive a restart) and the audit trail (auditLog).
 */
export function gatewayStorage(c: { stateDir: string; auditLog: string }): { store: SessionStore; audit: AuditLog } {
  return { store: new FileSessionStore(join(c.stateDir, 'sessions')), audit: new FileAuditLog(c.auditLog) };
}
