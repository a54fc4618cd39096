/**
 * The flags every client command takes to reach a gateway (--gateway, --token, TLS, and for
 * commands that keep a session open --token-file), their help lines, and the connect they
 * drive. One definition: the commands spread these options and print these lines.
 */

import { startTelemetry } from '../core/telemetry/telemetry.js';
import { readFileSync } from 'node:fs';
import { GatewayClient, type ConnectOptions } from '../client/gateway-client.js';
import { readTokenFile } from '../core/auth/token-file.js';
import { TetherError } from '../core/errors.js';
import { pick, required } from './args.js';
import { standardDialers } from '../core/link/dial.js';
import { storedTokenFor } from './credentials.js';

/** TLS options every client command takes (wss:// and grpcs:// with a private CA, mutual TLS). */
export const TLS_CLIENT_OPTIONS = {
  ca: { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
} as const;

export const TLS_CLIENT_HELP = `  --ca FILE         trust this CA (PEM) for wss:// and grpcs:// (env TETHER_CA)
  --tls-cert FILE   client certificate (PEM) for mutual TLS (env TETHER_TLS_CERT)
  --tls-key FILE    its private key (PEM) (env TETHER_TLS_KEY)`;

/** --gateway (repeatable: gateways of one cluster), --token and the TLS options. */
export const CONNECTION_OPTIONS = {
  gateway: { type: 'string', multiple: true },
  token: { type: 'string' },
  ...TLS_CLIENT_OPTIONS,
} as const;

/**
 * The help lines of --gateway and --token, their descriptions starting at `column` (each
 * command aligns its own option list).
 */
export function connectionHelp(column: number): string {
  return [
    ['--gateway URL', 'gateway URL (env TETHER_GATEWAY); several: repeat or use commas'],
    ['--token TOKEN', 'client token (env TETHER_TOKEN; else the one tether login kept)'],
  ]
    .map(([flag, text]) => `  ${flag}`.padEnd(column) + text)
    .join('\n');
}

/** `--token-file` (commands that keep a session open): the option and its help line. */
export const TOKEN_FILE_OPTION = { 'token-file': { type: 'string' } } as const;
export const TOKEN_FILE_HELP = `  --token-file FILE        read the client token from FILE instead, again at every reconnect
                           and before it expires (the live connection renews itself: replace
                           the file with a fresh token, e.g. tether token --out FILE)`;

function pem(path: string | undefined, what: string): Buffer | undefined {
  if (!path) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TetherError(
      'INVALID_ARGUMENT',
      `cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
}

/**
 * The gateways a client command may use: --gateway (repeatable, commas allowed), else
 * TETHER_GATEWAY (commas allowed). Several are gateways of one cluster, tried in turn.
 */
export function gatewaysFrom(v: Record<string, unknown>): string[] {
  const flags = ([] as unknown[]).concat(v.gateway ?? []).filter((g): g is string => typeof g === 'string' && g !== '');
  return flags.length ? flags : [required(pick(undefined, 'TETHER_GATEWAY'), '--gateway (or TETHER_GATEWAY)')];
}

/** Connects to the gateway the connection flags (or TETHER_* variables) name; INVALID_ARGUMENT for a missing or unreadable one. */
export async function connectFrom(
  v: Record<string, unknown>,
  software: string,
  onStatus?: ConnectOptions['onStatus'],
): Promise<GatewayClient> {
  const tokenFile = v['token-file'] as string | undefined;
  if (tokenFile !== undefined && v.token !== undefined) throw new TetherError('INVALID_ARGUMENT', 'use --token or --token-file, not both');
  const gateways = gatewaysFrom(v);
  return GatewayClient.connect({
    gateway: gateways,
    // --token, then TETHER_TOKEN, then what tether login kept for this gateway.
    token: tokenFile === undefined ? (pick(v.token, 'TETHER_TOKEN') ?? storedTokenFor(gateways)) : undefined,
    tokenSource: tokenFile === undefined ? undefined : () => readTokenFile(tokenFile),
    dial: {
      ca: pem(pick(v.ca, 'TETHER_CA'), '--ca'),
      tlsCert: pem(pick(v['tls-cert'], 'TETHER_TLS_CERT'), '--tls-cert'),
      tlsKey: pem(pick(v['tls-key'], 'TETHER_TLS_KEY'), '--tls-key'),
    },
    dialers: standardDialers(),
    software,
    onStatus,
    telemetry: await startTelemetry('tether-client'),
  });
}
