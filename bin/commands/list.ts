import type { GatewayClient } from '../../client/gateway-client.js';
import type { Command } from '../args.js';
import { connectFrom, connectionHelp, CONNECTION_OPTIONS, TLS_CLIENT_HELP } from '../connection-flags.js';
import { table } from '../table.js';

/** The list commands' options: the connection flags and --json. */
export const LIST_OPTIONS = { ...CONNECTION_OPTIONS, json: { type: 'boolean' } } as const;

/** A list command's --help: usage, the connection flags, `--json` with what it prints, and `more` (its own flags' lines). */
export function listUsage(name: string, json: string, more = { usage: '', lines: '' }): string {
  return `Usage: tether ${name} --gateway URL [--token TOKEN] [--json]${more.usage}

${connectionHelp(18)}
  --json          ${json}
${more.lines}${TLS_CLIENT_HELP}
  -h, --help      show this help`;
}

export const agentsCommand: Command = {
  name: 'agents',
  summary: 'list the agents connected to a gateway (in a cluster: to any gateway, and which)',
  usage: listUsage('agents', 'print a JSON array'),
  options: LIST_OPTIONS,
  run: (v) =>
    printList(
      v,
      (c) => c.listAgents(),
      'no agents connected',
      ['NAME', 'HOST', 'ENGINES', 'SESSIONS', 'TRANSPORT', 'SINCE'],
      (a) => [a.name, a.host, a.engines.join(','), String(a.sessions.length), a.transport, a.connected_at],
    ),
};

export const sessionsCommand: Command = {
  name: 'sessions',
  summary: 'list the sessions you can see on a gateway (in a cluster: the fleet, and which gateway holds each)',
  usage: listUsage('sessions', 'print a JSON array (id, title, agent, owner, state, clients, pending_prompts, ...)'),
  options: LIST_OPTIONS,
  run: (v) =>
    printList(
      v,
      (c) => c.listSessions(),
      'no sessions',
      ['ID', 'TITLE', 'AGENT', 'ENGINE', 'OWNER', 'STATE', 'CLIENTS', 'PENDING'],
      (s) => [
        s.id,
        s.title ?? '-',
        s.agent,
        s.engine,
        s.owner,
        s.agent_away_since
          ? `${s.state} (agent away since ${s.agent_away_since}${s.queued_inputs ? `, ${s.queued_inputs} queued` : ''})`
          : s.state,
        s.clients.map((c) => `${c.principal}(${c.role})`).join(',') || '-',
        String(s.pending_prompts),
      ],
    ),
};

/**
 * Connects, fetches a list, prints it as JSON (--json) or a table, and closes. In a cluster
 * (items name their gateway) the table gains a GATEWAY column: which gateway holds each.
 */
async function printList<T extends { gateway?: string }>(
  v: Record<string, unknown>,
  fetch: (c: GatewayClient) => Promise<T[]>,
  empty: string,
  head: string[],
  row: (item: T) => string[],
): Promise<number> {
  const client = await connectFrom(v, 'tether-cli');
  try {
    writeList(v, await fetch(client), empty, head, row);
    return 0;
  } finally {
    await client.close();
  }
}

/** Prints one list as JSON (--json: one array on one line) or a table, with a GATEWAY column in a cluster. */
export function writeList<T extends { gateway?: string }>(
  v: Record<string, unknown>,
  items: T[],
  empty: string,
  head: string[],
  row: (item: T) => string[],
): void {
  const clustered = items.some((i) => i.gateway !== undefined);
  const rows = items.map((i) => (clustered ? [...row(i), i.gateway ?? '-'] : row(i)));
  if (v.json) process.stdout.write(JSON.stringify(items) + '\n');
  else process.stdout.write(items.length ? table(clustered ? [...head, 'GATEWAY'] : head, rows) : empty + '\n');
}
