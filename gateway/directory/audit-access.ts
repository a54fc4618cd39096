import { TetherError } from '../../core/errors.js';
import type { AuditQuery, AuditResult } from '../../core/protocol/audit.js';
import type { Principal } from '../door/principal.js';
import type { SessionDirectory } from './session-directory.js';

/**
 * Answers `session.audit`. An admin reads the whole trail, with any filters. Anyone else must
 * name one session they own: a live session whose owner they are, or a gone one whose `create`
 * record names them (the trail outlives the session). A session the caller can see but does
 * not own is PERMISSION_DENIED; one it cannot see is NOT_FOUND, like one that never existed.
 * The reply keeps the newest records within AUDIT_MAX_REPLY_BYTES.
 */
/** Largest `session.audit` reply (well under a frame): older records beyond it are left out. */
export const AUDIT_MAX_REPLY_BYTES = 8 * 1024 * 1024;

export async function readAudit(dir: SessionDirectory, p: Principal, query: AuditQuery): Promise<AuditResult> {
  if (p.canAdmin) return fitReply(await dir.audit.read(query));
  const id = query.session_id;
  if (id === undefined)
    throw new TetherError(
      'PERMISSION_DENIED',
      'reading the whole audit trail needs the admin scope; name one of your sessions (session_id)',
    );
  const live = dir.get(id);
  const owner = live ? live.owner : (await dir.audit.read({ session_id: id, action: 'create', limit: 1 })).entries[0]?.principal;
  if (owner === p.sub) return fitReply(await dir.audit.read(query));
  dir.visible(p, id); // NOT_FOUND when the caller cannot see it
  throw new TetherError('PERMISSION_DENIED', `only the owner of session ${id} or an admin may read its audit trail`);
}

/** Keeps the newest records that fit AUDIT_MAX_REPLY_BYTES; `truncated` says older ones were left out. */
function fitReply(r: AuditResult): AuditResult {
  let bytes = 0;
  let first = r.entries.length;
  while (first > 0) {
    bytes += Buffer.byteLength(JSON.stringify(r.entries[first - 1])) + 1;
    if (bytes > AUDIT_MAX_REPLY_BYTES) break;
    first--;
  }
  return first === 0 ? r : { ...r, entries: r.entries.slice(first), truncated: true };
}
