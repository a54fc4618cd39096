import { ensureStateKey } from '../core/auth/state-dir.js';
import { TetherError } from '../core/errors.js';
import type { Logger } from '../core/logging.js';
import { Cluster } from '../gateway/cluster/cluster.js';
import { FabricMac } from '../gateway/cluster/fabric-mac.js';
import { natsDialOf, NO_AUTH_WARNING, type ClusterAuthConfig } from '../gateway/cluster/nats-auth.js';
import type { GatewayAuthSetup } from './auth-options.js';

/**
 * Joins the cluster: NATS authentication and TLS from the cluster keys (refused without
 * authentication unless the operator said --cluster-insecure-no-auth, then warned at every
 * start), and the fabric's MAC key derived from the gateways' shared token key (the one that
 * signs tokens; with authentication off or only a JWKS, the state folder's, which every
 * gateway of the cluster must then share).
 */
export async function joinCluster(
  c: ClusterAuthConfig & { cluster: string; stateDir: string; keyFile?: string },
  auth: GatewayAuthSetup,
  logger: Logger,
): Promise<Cluster> {
  const dial = natsDialOf(c);
  if (dial.method === 'none') {
    process.stderr.write(NO_AUTH_WARNING);
    logger.warn({ server: dial.shown }, 'cluster NATS link without authentication (--cluster-insecure-no-auth)');
  }
  if (!auth.signingKey && c.keyFile) {
    throw new TetherError(
      'FAILED_PRECONDITION',
      `--key ${c.keyFile} only verifies: the gateways of a cluster sign what they tell each other with a key derived from their shared signing key (a secret or private key)`,
    );
  }
  const mac = FabricMac.fromTokenKey(auth.signingKey ?? ensureStateKey(c.stateDir).key);
  logger.info({ server: dial.shown, auth: dial.method, tls: dial.tls !== undefined }, 'joining the cluster');
  return Cluster.join(dial, mac, logger);
}
