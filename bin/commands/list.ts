import type { GatewayClient } from '../../client/gateway-client.js';
import { personLabel } from '../../client/terminal-render.js';
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
        personLabel({ principal: s.owner, name: s.owner_name }),
        s.agent_away_since
          ? `${s.state} (agent away since ${s.agent_away_since}${s.queued_inputs ? `, ${s.queued_inputs} queued` : ''})`
          : s.state,
        s.clients.map((c) => `${personLabel(c)}(${c.role})`).join(',') || '-',
        String(s.pending_prompts),
      ],
    ),
};

export const worktreesCommand: Command = {
  name: 'worktrees',
  summary: "list sessions' git worktrees: running ones, and those kept at the end because they held changes",
  usage: `${listUsage('worktrees', 'print a JSON array of sessions (id, agent, state, worktree: path, branch, base, state, reason)', {
    usage: ' [--agent NAME]',
    lines: '  --agent NAME    only worktrees on this agent\n',
  })}

A worktree removed at the end (it was clean) is not listed. Ended sessions are listed while the
gateway keeps them (its ended-session retention); after that 'git worktree list' in the repository
shows what is left in its .tether-worktrees folder.`,
  options: { ...LIST_OPTIONS, agent: { type: 'string' } },
  run: (v) =>
    printList(
      v,
      async (c) =>
        (await c.listSessions()).filter(
          (s) => s.worktree !== undefined && s.worktree.state !== 'removed' && (v.agent === undefined || s.agent === v.agent),
        ),
      v.agent === undefined ? 'no worktrees' : `no worktrees on agent ${v.agent as string}`,
      ['SESSION', 'AGENT', 'WORKTREE', 'BRANCH', 'PATH', 'REASON'],
      (s) => [s.id, s.agent, s.worktree?.state ?? '-', s.worktree?.branch ?? '-', s.worktree?.path ?? '-', s.worktree?.reason ?? '-'],
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
