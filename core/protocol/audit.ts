import { z } from 'zod';

/**
 * The audit trail's records and queries, defined once: the gateway writes them (one JSON
 * line each), `session.audit` returns them, `tether audit` prints and filters them, online
 * or straight from the file.
 */

/** What a record says happened. Each is written before it takes effect. */
export const AuditAction = z.enum([
  'create',
  'attach',
  'detach',
  'prompt',
  'permission_decision',
  'policy_decision',
  'control',
  'role_change',
  'rule_withdrawn',
  'prompt_withdrawn',
  'stop',
  'ended',
  'engine_resumed',
  'owner_change',
  'move',
  /** The agent created the session's git worktree (its creator's request). */
  'worktree_create',
  /** At the session's end the agent removed its clean worktree, or kept a dirty one (`state`, `reason`). */
  'worktree_end',
  'rename',
  'budget',
]);
export type AuditAction = z.infer<typeof AuditAction>;

/**
 * One record as written and read back: when, which session, who, what, then the action's own
 * details (wire names). `result: "failed"` with `code` follows a record whose action was then
 * refused on its way (e.g. the engine's queue was full): the first record stays, as evidence
 * of the attempt.
 */
export const AuditRecord = z.looseObject({
  time: z.string(),
  session_id: z.string(),
  principal: z.string(),
  action: AuditAction,
});
export type AuditRecord = z.infer<typeof AuditRecord>;

/**
 * Decisions records can be filtered by: a person's permission_decision (its `behavior`) or
 * the central policy's policy_decision (its `decision`; `none` when no rule applied and the
 * engine decided).
 */
export const AuditDecision = z.enum(['allow', 'deny', 'ask', 'none']);

/** Default and largest number of records one query returns. */
export const AUDIT_DEFAULT_LIMIT = 1000;
export const AUDIT_MAX_LIMIT = 100_000;

/** Which records to return: every given filter must match; the newest `limit`, oldest first. */
export const AuditQuery = z.object({
  session_id: z.string().min(1).max(128).optional(),
  principal: z.string().min(1).max(256).optional(),
  action: AuditAction.optional(),
  /** Only decisions with this outcome (implies action permission_decision or policy_decision). */
  decision: AuditDecision.optional(),
  limit: z.number().int().positive().max(AUDIT_MAX_LIMIT).optional(),
});
export type AuditQuery = z.infer<typeof AuditQuery>;

/**
 * What a query found. `corrupt_lines`: lines of the scanned file that are not audit records
 * (damage or tampering; never silently dropped). `truncated`: older matching records may have
 * been left out, because the file is larger than the gateway scans per query or the reply
 * would be too large (read the file offline, or narrow the query).
 */
export const AuditResult = z.object({
  entries: z.array(AuditRecord),
  corrupt_lines: z.number().int().nonnegative().default(0),
  truncated: z.boolean().default(false),
});
export type AuditResult = z.infer<typeof AuditResult>;

/** Whether one record matches a query's filters (the limit aside). */
export function auditMatches(r: AuditRecord, q: AuditQuery): boolean {
  if (q.session_id !== undefined && r.session_id !== q.session_id) return false;
  if (q.principal !== undefined && r.principal !== q.principal) return false;
  if (q.action !== undefined && r.action !== q.action) return false;
  if (
    q.decision !== undefined &&
    !(r.action === 'permission_decision' ? r.behavior === q.decision : r.action === 'policy_decision' && r.decision === q.decision)
  )
    return false;
  return true;
}
