import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { checkedString, loadableFile } from '../../core/config/common.js';
import { pemFile } from '../../core/config/tls-keys.js';
import type { FinishContext } from '../../core/config/load.js';
import { parseClusterUrl } from './cluster-url.js';

/** A file that must be readable and not empty when the configuration is loaded (also the OIDC client secret's). */
export function secretFile(path: string): void {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!text.trim()) throw new Error(`${path} is empty`);
}

/**
 * The gateway's cluster keys: the NATS server and how the gateway authenticates to it
 * (gateway/cluster/nats-auth.ts turns them into connection options and refuses a cluster
 * without authentication unless clusterInsecureNoAuth). Secrets come from files or the
 * environment, never from a flag (a command line is visible to every user of the machine).
 */
export const CLUSTER_KEYS = {
  cluster: checkedString(parseClusterUrl).optional().meta({
    help: "join a cluster of gateways on this NATS server with JetStream (nats://HOST:PORT, tls://HOST:PORT, credentials allowed: nats://USER:PASS@HOST:PORT): sessions, history and the fleet's registry live there; absent: a single gateway",
    flag: 'cluster',
  }),
  clusterCreds: loadableFile(secretFile).optional().meta({
    help: "NATS credentials file (user JWT and nkey seed, from nsc) the gateway authenticates to the cluster's NATS with",
    flag: 'cluster-creds',
  }),
  clusterNkey: loadableFile(secretFile)
    .optional()
    .meta({ help: 'file holding the NATS nkey seed (SU...) the gateway authenticates with', flag: 'cluster-nkey' }),
  clusterUser: z.string().min(1).optional().meta({
    help: 'NATS user the gateway authenticates as (its password from clusterPasswordFile or TETHER_CLUSTER_PASSWORD)',
    flag: 'cluster-user',
  }),
  clusterPasswordFile: loadableFile(secretFile)
    .optional()
    .meta({ help: 'file holding the NATS password of clusterUser', flag: 'cluster-password-file' }),
  clusterPassword: z
    .string()
    .min(1)
    .optional()
    .meta({ help: 'the NATS password of clusterUser (no flag: a command line is visible to every user)', secret: true }),
  clusterTokenFile: loadableFile(secretFile)
    .optional()
    .meta({ help: 'file holding the NATS token the gateway authenticates with', flag: 'cluster-token-file' }),
  clusterToken: z
    .string()
    .min(1)
    .optional()
    .meta({ help: 'the NATS token the gateway authenticates with (no flag: a command line is visible to every user)', secret: true }),
  clusterTlsCa: pemFile("trust this CA (PEM) for the cluster's NATS server (TLS)", 'cluster-tls-ca'),
  clusterTlsCert: pemFile("client certificate (PEM) the gateway presents to the cluster's NATS server", 'cluster-tls-cert'),
  clusterTlsKey: pemFile('private key (PEM) of clusterTlsCert', 'cluster-tls-key'),
  clusterInsecureNoAuth: z.boolean().default(false).meta({
    help: 'join a NATS server that asks for no authentication (refused otherwise): anyone reaching it reads every session; a warning at every start',
    flag: 'cluster-insecure-no-auth',
  }),
};

/** The cluster keys as nats-auth.ts reads them (cluster-keys.ts stays free of the NATS client). */
export interface ClusterAuthKeys {
  cluster?: string;
  clusterCreds?: string;
  clusterNkey?: string;
  clusterUser?: string;
  clusterPasswordFile?: string;
  clusterPassword?: string;
  clusterTokenFile?: string;
  clusterToken?: string;
  clusterTlsCert?: string;
  clusterTlsKey?: string;
}

/** What is wrong with how the cluster keys combine (two ways to authenticate, a user without a password, …), if anything. */
export function clusterAuthProblem(c: ClusterAuthKeys): string | undefined {
  const inUrl = c.cluster !== undefined && URL.canParse(c.cluster) && new URL(c.cluster).username !== '';
  const ways = [
    c.clusterCreds && '--cluster-creds',
    c.clusterNkey && '--cluster-nkey',
    c.clusterUser && '--cluster-user',
    (c.clusterTokenFile || c.clusterToken) && 'a token',
    inUrl && 'credentials in the URL',
  ].filter(Boolean);
  if (ways.length > 1) return `give one way to authenticate, not ${ways.join(' and ')}`;
  if ((c.clusterPasswordFile || c.clusterPassword) && !c.clusterUser) return 'a password needs --cluster-user';
  if (c.clusterPasswordFile && c.clusterPassword) return 'give --cluster-password-file or TETHER_CLUSTER_PASSWORD, not both';
  if (c.clusterTokenFile && c.clusterToken) return 'give --cluster-token-file or TETHER_CLUSTER_TOKEN, not both';
  if (c.clusterUser && !c.clusterPasswordFile && !c.clusterPassword)
    return '--cluster-user needs --cluster-password-file FILE or TETHER_CLUSTER_PASSWORD';
  if ((c.clusterTlsCert === undefined) !== (c.clusterTlsKey === undefined))
    return 'a TLS client certificate needs both --cluster-tls-cert and --cluster-tls-key';
  return undefined;
}

/** Config-time check of the cluster keys: every problem is reported with the others, before anything starts (exit 2). */
export function checkClusterKeys(c: ClusterAuthKeys & { cluster?: string }, ctx: FinishContext): void {
  const problem = clusterAuthProblem(c);
  if (problem) ctx.problem('cluster', `cluster authentication: ${problem}`);
}
