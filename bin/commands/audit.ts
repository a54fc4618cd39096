import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { TetherError } from '../../core/errors.js';
import { AUDIT_DEFAULT_LIMIT, AUDIT_MAX_LIMIT, AuditAction, AuditQuery, type AuditRecord } from '../../core/protocol/audit.js';
import { AUDIT_FILE, scanAuditFile, type AuditScan } from '../../gateway/audit/audit-reader.js';
import type { Command } from '../args.js';
import { connectFrom, connectionHelp, CONNECTION_OPTIONS, TLS_CLIENT_HELP } from '../connection-flags.js';
import { table } from '../table.js';
import { oneLine } from '../../client/terminal-render.js';

export const auditCommand: Command = {
  name: 'audit',
  summary: 'print the audit trail (who created, attached, prompted, approved, stopped what)',
  usage: `Usage: tether audit [SESSION] [--session ID] [--principal NAME] [--action NAME]
                    [--decision allow|deny|ask|none] [--limit N] [--table | --json]
                    [--gateway URL] [--token TOKEN]  |  [--state-dir DIR | --file FILE]

Prints audit records, oldest first. The gateway writes one record per decision or action
(create with the session's options, attach, detach, prompt, permission_decision,
policy_decision, control, role_change, stop, ended) before it takes effect; an action it
cannot record is not applied.
Online (the default) it asks the gateway (session.audit): a session's owner may read that
session's records; the whole trail needs a token with the admin scope. Offline (--state-dir
or --file) it reads the gateway's audit file itself, e.g. while the gateway is down: run it
on the gateway's machine as the user that runs the gateway (the file is mode 0600); the
rotated files beside it (FILE.1, FILE.2, …) are read too, oldest first.
A line of the file that is not an audit record is never skipped silently: the count (and,
offline, the line numbers) goes to stderr and the exit code is 1.

Output: a table on a terminal (or --table); JSON lines otherwise (or --json). The table's
TURN column says whose turn a tool call came from (turn_authors: the principals whose prompts
started or joined it; "-" for records about no tool call).

Options:
  SESSION, --session ID  only this session's records
  --principal NAME    only records made by NAME (a token's sub; the gateway's own decisions
                      are tether, tether:expiry, tether:overflow, tether:policy)
  --action NAME       only create, attach, detach, prompt, permission_decision,
                      policy_decision, control, role_change, stop or ended
  --decision D        only decisions that were allow, deny, ask or none: a person's
                      permission_decision, or the policy's policy_decision (none: no rule
                      applied and the engine decided)
  --limit N           the newest N matching records (default ${AUDIT_DEFAULT_LIMIT}, at most ${AUDIT_MAX_LIMIT})
  --table             print a table
  --json              print JSON lines, one record each
  --state-dir DIR     offline: read DIR/${AUDIT_FILE} (the gateway's --state-dir)
  --file FILE         offline: read this audit file (the gateway's --audit-log)
${connectionHelp(22)}
${TLS_CLIENT_HELP}
  -h, --help          show this help`,
  options: {
    session: { type: 'string' },
    principal: { type: 'string' },
    action: { type: 'string' },
    decision: { type: 'string' },
    limit: { type: 'string' },
    table: { type: 'boolean' },
    json: { type: 'boolean' },
    'state-dir': { type: 'string' },
    file: { type: 'string' },
    ...CONNECTION_OPTIONS,
  },
  allowPositionals: true,
  async run(v, positionals) {
    const query = queryOf(v, positionals);
    if (v.table && v.json) throw new TetherError('INVALID_ARGUMENT', '--table and --json exclude each other');
    const asTable = v.table === true || (v.json !== true && process.stdout.isTTY === true);
    const file = offlineFile(v);
    const found = file ? readOffline(file, query) : await readOnline(v, query);
    if (asTable) process.stdout.write(found.entries.length ? auditTable(found.entries) : 'no audit records\n');
    else for (const e of found.entries) process.stdout.write(JSON.stringify(e) + '\n');
    return reportDamage(found, file);
  },
};

/** The query the flags ask for; INVALID_ARGUMENT naming the bad flag otherwise. */
function queryOf(v: Record<string, unknown>, positionals: string[]): AuditQuery {
  if (positionals.length > 1) throw new TetherError('INVALID_ARGUMENT', 'give at most one SESSION\nRun "tether audit --help" for usage.');
  const [positional] = positionals;
  if (positional !== undefined && v.session !== undefined && positional !== v.session) {
    throw new TetherError('INVALID_ARGUMENT', 'SESSION and --session name different sessions');
  }
  const limit = v.limit === undefined ? undefined : Number(v.limit);
  const parsed = AuditQuery.safeParse({
    session_id: positional ?? v.session,
    principal: v.principal,
    action: v.action,
    decision: v.decision,
    limit,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const flag =
      { session_id: '--session', principal: '--principal', action: '--action', decision: '--decision', limit: '--limit' }[
        String(issue.path[0])
      ] ?? String(issue.path[0]);
    const want =
      flag === '--action'
        ? `one of ${AuditAction.options.join(', ')}`
        : flag === '--decision'
          ? 'allow, deny, ask or none'
          : flag === '--limit'
            ? `a whole number 1-${AUDIT_MAX_LIMIT}`
            : issue.message;
    throw new TetherError('INVALID_ARGUMENT', `${flag} must be ${want}\nRun "tether audit --help" for usage.`);
  }
  return parsed.data;
}

/** The audit file an offline read names, or undefined for an online read. */
function offlineFile(v: Record<string, unknown>): string | undefined {
  if (v['state-dir'] !== undefined && v.file !== undefined)
    throw new TetherError('INVALID_ARGUMENT', '--state-dir and --file exclude each other');
  if (v.file !== undefined) return resolve(v.file as string);
  if (v['state-dir'] !== undefined) return resolve(join(v['state-dir'] as string, AUDIT_FILE));
  return undefined;
}

function readOffline(file: string, query: AuditQuery): AuditScan {
  if (!existsSync(file)) throw new TetherError('NOT_FOUND', `no audit file at ${file}`);
  return scanAuditFile(file, query);
}

async function readOnline(v: Record<string, unknown>, query: AuditQuery): Promise<AuditScan> {
  const client = await connectFrom(v, 'tether-audit');
  try {
    const peer = await client.peer();
    return { ...(await peer.request('session.audit', query)), corrupt: [] };
  } finally {
    await client.close();
  }
}

/** Reports corrupt lines and a cut-off scan on stderr; the exit code (1 when lines were corrupt). */
function reportDamage(found: AuditScan, file: string | undefined): number {
  if (found.truncated)
    process.stderr.write(
      'tether audit: older records may be missing: the trail is larger than the gateway scans or sends per request (narrow the query, or read it offline with --state-dir or --file)\n',
    );
  if (found.corrupt_lines === 0) return 0;
  const where = found.corrupt.map((c) => (c.line !== undefined ? `line ${c.line}` : `byte ${c.offset}`)).join(', ');
  process.stderr.write(
    `tether audit: ${found.corrupt_lines} line(s) of the audit trail are not audit records${file && where ? ` (${file}: ${where}${found.corrupt_lines > found.corrupt.length ? ', …' : ''})` : ''}\n`,
  );
  return 1;
}

/**
 * Records as a table: time, session, principal, action, whose turn, then the rest as key=value. Clients
 * chose much of it (principal names, reasons, subtypes, tool names), so each cell is one line
 * without escape sequences or control characters: a record cannot retitle the terminal, erase
 * lines or forge rows. (--json prints the records exactly; JSON escapes control characters.)
 */
export function auditTable(records: AuditRecord[]): string {
  const cell = (text: string) => oneLine(text, Number.POSITIVE_INFINITY);
  const rows = records.map((r) => {
    const { time, session_id, principal, action, turn_authors, ...rest } = r;
    const details = Object.entries(rest)
      .filter(([, x]) => x !== undefined)
      .map(([k, x]) => `${k}=${typeof x === 'string' && /^[^\s"=]+$/.test(x) ? x : JSON.stringify(x)}`)
      .join(' ');
    // Whose turn a tool call came from (issue 31): "-" for records that are not about one.
    const turn = Array.isArray(turn_authors) ? turn_authors.join(',') || '?' : '-';
    return [time, session_id, principal, action, turn, details].map((x) => cell(String(x)));
  });
  return table(['TIME', 'SESSION', 'PRINCIPAL', 'ACTION', 'TURN', 'DETAILS'], rows);
}
