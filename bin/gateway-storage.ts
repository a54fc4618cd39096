import { join } from 'node:path';
import { FileAuditLog, type AuditLog } from '../gateway/audit-log.js';
import { FileSessionStore, type SessionStore } from '../gateway/session-store.js';
import { HostKeyPins } from '../gateway/host-key-pins.js';

export const STORAGE_FLAGS_HELP = `  --audit-log FILE   audit trail, JSON lines (default STATE_DIR/audit.jsonl)`;

/** Agents' pinned host keys, under the state folder. */
export const AGENT_HOST_KEYS_FILE = 'agent-host-keys.json';

/**
 * The gateway's durable state under the state folder: sessions and their history
 * (STATE_DIR/sessions, so they survive a restart), the audit trail (auditLog) and the
 * agents' pinned host keys (STATE_DIR/agent-host-keys.json).
 */
export function gatewayStorage(c: { stateDir: string; auditLog: string }): { store: SessionStore; audit: AuditLog; hostKeys: HostKeyPins } {
  return { store: new FileSessionStore(join(c.stateDir, 'sessions')), audit: new FileAuditLog(c.auditLog), hostKeys: new HostKeyPins(join(c.stateDir, AGENT_HOST_KEYS_FILE)) };
}
