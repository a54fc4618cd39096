import { readFileSync } from 'node:fs';
import { GatewayClient, type ConnectOptions } from '../../client/gateway-client.js';
import { readTokenFile } from '../../core/auth/token-file.js';
import { TetherError } from '../../core/errors.js';
import type { CreateProgress } from '../../core/protocol/methods.js';
import { pick, required, type Command } from '../args.js';

/** TLS options every client command takes (wss:// and grpcs:// with a private CA, mutual TLS). */
export const TLS_CLIENT_OPTIONS = {
  ca: { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
} as const;

export const TLS_CLIENT_HELP = `  --ca FILE         trust this CA (PEM) for wss:// and grpcs:// (env TETHER_CA)
  --tls-cert FILE   client certificate (PEM) for mutual TLS (env TETHER_TLS_CERT)
  --tls-key FILE    its private key (PEM) (env TETHER_TLS_KEY)`;

const connectionOptions = {
  gateway: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  ...TLS_CLIENT_OPTIONS,
} as const;

function pem(path: string | undefined, what: string): Buffer | undefined {
  if (!path) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** Tells the person at the terminal (stderr) that a create waits, e.g. for its agent to come back. */
export function printCreateProgress(p: CreateProgress): void {
  process.stderr.write(`* ${p.message}\n`);
}

/** `--token-file` (commands that keep a session open): the option and its help line. */
export const TOKEN_FILE_OPTION = { 'token-file': { type: 'string' } } as const;
export const TOKEN_FILE_HELP = `  --token-file FILE        read the client token from FILE instead, again at every reconnect
                           and before it expires (the live connection renews itself: replace
                           the file with a fresh token, e.g. tether token --out FILE)`;

export async function connectFrom(v: Record<string, unknown>, software: string, onStatus?: ConnectOptions['onStatus']): Promise<GatewayClient> {
  const tokenFile = v['token-file'] as string | undefined;
  if (tokenFile !== undefined && v.token !== undefined) throw new TetherError('INVALID_ARGUMENT', 'use --token or --token-file, not both');
  return GatewayClient.connect({
    gateway: required(pick(v.gateway, 'TETHER_GATEWAY'), '--gateway (or TETHER_GATEWAY)'),
    token: tokenFile === undefined ? pick(v.token, 'TETHER_TOKEN') : undefined,
    tokenSource: tokenFile === undefined ? undefined : () => readTokenFile(tokenFile),
    dial: {
      ca: pem(pick(v.ca, 'TETHER_CA'), '--ca'),
      tlsCert: pem(pick(v['tls-cert'], 'TETHER_TLS_CERT'), '--tls-cert'),
      tlsKey: pem(pick(v['tls-key'], 'TETHER_TLS_KEY'), '--tls-key'),
    },
    software,
    onStatus,
  });
}

export const agentsCommand: Command = {
  name: 'agents',
  summary: 'list the agents connected to a gateway',
  usage: `Usage: tether agents --gateway URL [--token TOKEN] [--json]

  --gateway URL   gateway URL (env TETHER_GATEWAY)
  --token TOKEN   client token (env TETHER_TOKEN)
  --json          print a JSON array
${TLS_CLIENT_HELP}
  -h, --help      show this help`,
  options: connectionOptions,
  run: (v) =>
    printList(v, (c) => c.listAgents(), 'no agents connected', ['NAME', 'HOST', 'ENGINES', 'SESSIONS', 'TRANSPORT', 'SINCE'], (a) => [
      a.name,
      a.host,
      a.engines.join(','),
      String(a.sessions.length),
      a.transport,
      a.connected_at,
    ]),
};

export const sessionsCommand: Command = {
  name: 'sessions',
  summary: 'list the sessions you can see on a gateway',
  usage: `Usage: tether sessions --gateway URL [--token TOKEN] [--json]

  --gateway URL   gateway URL (env TETHER_GATEWAY)
  --token TOKEN   client token (env TETHER_TOKEN)
  --json          print a JSON array (id, agent, owner, state, clients, pending_prompts, ...)
${TLS_CLIENT_HELP}
  -h, --help      show this help`,
  options: connectionOptions,
  run: (v) =>
    printList(v, (c) => c.listSessions(), 'no sessions', ['ID', 'AGENT', 'ENGINE', 'OWNER', 'STATE', 'CLIENTS', 'PENDING'], (s) => [
      s.id,
      s.agent,
      s.engine,
      s.owner,
      s.state,
      s.clients.map((c) => `${c.principal}(${c.role})`).join(',') || '-',
      String(s.pending_prompts),
    ]),
};

/** Connects, fetches a list, prints it as JSON (--json) or a table, and closes. */
async function printList<T>(v: Record<string, unknown>, fetch: (c: GatewayClient) => Promise<T[]>, empty: string, head: string[], row: (item: T) => string[]): Promise<number> {
  const client = await connectFrom(v, 'tether-cli');
  try {
    const items = await fetch(client);
    if (v.json) process.stdout.write(JSON.stringify(items) + '\n');
    else process.stdout.write(items.length ? table(head, items.map(row)) : empty + '\n');
    return 0;
  } finally {
    await client.close();
  }
}

/** Left-aligned columns, two spaces apart, a header row first. */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => rows.reduce((w, r) => Math.max(w, r[i].length), h.length)); // no spread: rows may be many
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd() + '\n';
  return line(head) + rows.map(line).join('');
}
