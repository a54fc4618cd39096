import { readFileSync } from 'node:fs';
import {
  credsAuthenticator,
  nkeyAuthenticator,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
  type Authenticator,
} from '@nats-io/transport-node';
import { TetherError } from '../../core/errors.js';
import { clusterAuthProblem, type ClusterAuthKeys } from './cluster-keys.js';
import { parseClusterUrl } from './cluster-url.js';

/** The gateway's keys that say how it authenticates to the cluster's NATS server (gateway/config.ts). */
export interface ClusterAuthConfig extends ClusterAuthKeys {
  clusterTlsCa?: string;
  clusterInsecureNoAuth: boolean;
}

/** How the link to NATS is made: the server, who the gateway is to it, and TLS. */
export interface NatsDial {
  server: string;
  /** The URL without any credentials it carried (for logs, /readyz and the `cluster:` line). */
  shown: string;
  authenticator?: Authenticator;
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  /** Which way it authenticates (logged at start); 'none' only with clusterInsecureNoAuth. */
  method: 'creds' | 'nkey' | 'user' | 'token' | 'tls-client-cert' | 'none';
}

/** Why a cluster without authentication is refused. */
export const NO_AUTH_MESSAGE =
  "the cluster's NATS server must authenticate the gateways: whoever reaches it unauthenticated can read every session and act as any gateway. " +
  'Give --cluster-creds FILE, --cluster-nkey FILE, --cluster-user USER with --cluster-password-file FILE (or TETHER_CLUSTER_PASSWORD), ' +
  '--cluster-token-file FILE (or TETHER_CLUSTER_TOKEN), credentials in the URL (nats://USER:PASS@HOST:PORT), or a TLS client certificate ' +
  '(--cluster-tls-cert and --cluster-tls-key); or, on a NATS server only the gateways can reach, --cluster-insecure-no-auth';

/** Printed (and logged) at every start with --cluster-insecure-no-auth. */
export const NO_AUTH_WARNING =
  "WARNING: the cluster's NATS link is NOT authenticated (--cluster-insecure-no-auth). Anyone who can reach that NATS server can read every session's history; only the gateways' MAC keeps them from acting as a gateway.\n";

const readText = (path: string) => readFileSync(path, 'utf8').trim();

/**
 * Turns the cluster keys into connection options. INVALID_ARGUMENT when they do not go
 * together (two ways to authenticate, a user without a password, a certificate without its
 * key); FAILED_PRECONDITION ({@link NO_AUTH_MESSAGE}) when nothing authenticates the gateway
 * and the operator did not say --cluster-insecure-no-auth. Files are read at each (re)connect,
 * so a rotated credential is used without a restart.
 */
export function natsDialOf(c: ClusterAuthConfig & { cluster: string }): NatsDial {
  const url = parseClusterUrl(c.cluster);
  const server = `${url.hostname}:${url.port}`;
  const shown = `${url.protocol}//${server}`;
  const problem = clusterAuthProblem(c);
  if (problem) throw new TetherError('INVALID_ARGUMENT', `cluster authentication: ${problem}`);
  const fromUrl = url.username
    ? { user: decodeURIComponent(url.username), pass: url.password ? decodeURIComponent(url.password) : undefined }
    : undefined;

  const tlsFiles = { caFile: c.clusterTlsCa, certFile: c.clusterTlsCert, keyFile: c.clusterTlsKey };
  const tls = url.protocol === 'tls:' || c.clusterTlsCa || c.clusterTlsCert ? tlsFiles : undefined;
  const dial = (method: NatsDial['method'], authenticator?: Authenticator): NatsDial => ({ server, shown, authenticator, tls, method });

  if (c.clusterCreds) {
    const path = c.clusterCreds;
    return dial(
      'creds',
      credsAuthenticator(() => readFileSync(path)),
    );
  }
  if (c.clusterNkey) {
    const path = c.clusterNkey;
    return dial(
      'nkey',
      nkeyAuthenticator(() => new TextEncoder().encode(readText(path))),
    );
  }
  if (c.clusterUser) {
    const file = c.clusterPasswordFile;
    const pass = c.clusterPassword;
    return dial('user', usernamePasswordAuthenticator(c.clusterUser, file ? () => readText(file) : pass));
  }
  if (c.clusterTokenFile || c.clusterToken) {
    const file = c.clusterTokenFile;
    const token = c.clusterToken;
    return dial('token', tokenAuthenticator(file ? () => readText(file) : token!));
  }
  if (fromUrl)
    return dial(
      fromUrl.pass === undefined ? 'token' : 'user',
      fromUrl.pass === undefined ? tokenAuthenticator(fromUrl.user) : usernamePasswordAuthenticator(fromUrl.user, fromUrl.pass),
    );
  if (c.clusterTlsCert) return dial('tls-client-cert');
  if (!c.clusterInsecureNoAuth) throw new TetherError('FAILED_PRECONDITION', NO_AUTH_MESSAGE);
  return dial('none');
}
