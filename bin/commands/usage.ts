import { TetherError } from '../../core/errors.js';
import { UsageGroupBy, UsageQuery, type UsageResult } from '../../core/protocol/usage.js';
import type { Command } from '../args.js';
import { connectFrom, connectionHelp, CONNECTION_OPTIONS, TLS_CLIENT_HELP } from '../connection-flags.js';
import { table } from '../table.js';
import { oneLine } from '../../client/terminal-render.js';

const UNITS_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

export const usageCommand: Command = {
  name: 'usage',
  summary: 'what turns cost: tokens and USD per principal, session, agent or model (the usage ledger)',
  usage: `Usage: tether usage [--since 7d] [--by principal|session|agent|model] [--session ID]
                    [--table | --json] [--gateway URL] [--token TOKEN]

Sums the gateway's usage ledger: one entry per engine turn, booked under the principal whose
prompt started it, with its model, tokens and cost in USD as the engine reported it. A token
with the admin scope sees every turn; any other sees the turns it started and the turns of
sessions it owns.

Options:
  --since DUR         only turns that ended in the last DUR: a number and m, h or d (e.g. 90m,
                      12h, 7d); default: everything the ledger keeps (the gateway's
                      --usage-retention-days, 90 by default)
  --by KEY            one row per principal (default), session, agent or model
  --session ID        only this session's turns
  --table             print a table (the default on a terminal)
  --json              print the sums as one JSON object (rows, total, scope)
${connectionHelp(22)}
${TLS_CLIENT_HELP}
  -h, --help          show this help`,
  options: {
    since: { type: 'string' },
    by: { type: 'string' },
    session: { type: 'string' },
    table: { type: 'boolean' },
    json: { type: 'boolean' },
    ...CONNECTION_OPTIONS,
  },
  async run(v) {
    if (v.table && v.json) throw new TetherError('INVALID_ARGUMENT', '--table and --json exclude each other');
    const query = queryOf(v, Date.now());
    const client = await connectFrom(v, 'tether-usage');
    let found: UsageResult;
    try {
      found = await (await client.peer()).request('usage.read', query);
    } finally {
      await client.close();
    }
    const asTable = v.table === true || (v.json !== true && process.stdout.isTTY === true);
    process.stdout.write(asTable ? usageTable(found) : JSON.stringify(found) + '\n');
    return 0;
  },
};

/** `--since 7d` as an epoch-ms start; INVALID_ARGUMENT naming the flag otherwise. */
export function sinceMs(text: string, nowMs: number): number {
  const m = /^(\d+)([mhd])$/.exec(text);
  if (!m) throw new TetherError('INVALID_ARGUMENT', `--since must be a number and m, h or d (e.g. 7d), not ${JSON.stringify(text)}`);
  return nowMs - Number(m[1]) * UNITS_MS[m[2] as keyof typeof UNITS_MS];
}

function queryOf(v: Record<string, unknown>, nowMs: number): UsageQuery {
  if (v.by !== undefined && !UsageGroupBy.safeParse(v.by).success)
    throw new TetherError('INVALID_ARGUMENT', `--by must be one of ${UsageGroupBy.options.join(', ')}`);
  const parsed = UsageQuery.safeParse({
    since_ms: v.since === undefined ? undefined : sinceMs(v.since as string, nowMs),
    by: v.by,
    session_id: v.session,
  });
  if (!parsed.success) throw new TetherError('INVALID_ARGUMENT', `--session: ${parsed.error.issues[0].message}`);
  return parsed.data;
}

/** The sums as a table, largest cost first, then the total; names are one line each (clients chose them). */
function usageTable(r: UsageResult): string {
  const row = (key: string, s: UsageResult['total']) => [
    oneLine(key, Number.POSITIVE_INFINITY),
    String(s.turns),
    String(s.input_tokens),
    String(s.output_tokens),
    String(s.cache_read_input_tokens),
    String(s.cache_creation_input_tokens),
    `$${s.cost_usd.toFixed(4)}`,
  ];
  const head = [r.by.toUpperCase(), 'TURNS', 'INPUT', 'OUTPUT', 'CACHE_READ', 'CACHE_WRITE', 'COST'];
  const note = r.scope === 'own' ? "(your turns and your sessions' turns)\n" : '';
  return table(head, [...r.rows.map((x) => row(x.key, x)), row('TOTAL', r.total)]) + note;
}
