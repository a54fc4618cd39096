import type { Logger } from '../../core/logging.js';
import { failureCode, recordOrRefuse, recordQuietly, type AuditEntry, type AuditLog } from '../audit/audit-log.js';

/** One session's voice in the audit trail: every record it writes carries the session's id. */
export class SessionAudit {
  constructor(
    private readonly sessionId: string,
    private readonly audit: AuditLog,
    private readonly logger: Logger,
  ) {}

  /** Writes the record before the action; throws (and the caller applies nothing) when it cannot. */
  record(principal: string, action: AuditEntry['action'], details: Record<string, unknown> = {}): void {
    recordOrRefuse(this.audit, { session_id: this.sessionId, principal, action, ...details }, this.logger);
  }

  /** Writes the record of something that happens anyway; a failure is logged, never thrown. */
  quietly(principal: string, action: AuditEntry['action'], details: Record<string, unknown> = {}): void {
    recordQuietly(this.audit, { session_id: this.sessionId, principal, action, ...details }, this.logger);
  }

  /** Records, then applies; when applying then fails, a second record says so and the error goes on. */
  audited(principal: string, action: AuditEntry['action'], details: Record<string, unknown>, apply: () => void): void {
    this.record(principal, action, details);
    try {
      apply();
    } catch (err) {
      this.quietly(principal, action, { ...details, result: 'failed', code: failureCode(err) });
      throw err;
    }
  }
}
