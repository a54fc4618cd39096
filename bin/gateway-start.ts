import type { Logger } from '../core/logging.js';
import { startTelemetry } from '../core/telemetry/telemetry.js';
import { doorLimitsOf, gatewayLimitsOf, serverTlsOf, type GatewayConfig } from '../gateway/config.js';
import { Gateway } from '../gateway/gateway.js';
import { GatewayMetrics } from '../gateway/metrics.js';
import { RevocationList } from '../gateway/door/revocations.js';
import { BrowserSignInFile } from '../gateway/door/browser-sign-in-file.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { acpEndpoint } from './acp-endpoint.js';
import { AUTH_OFF_WARNING, gatewayAuthFrom, type GatewayAuthSetup } from './auth-options.js';
import { gatewayStorage } from './gateway-storage.js';
import type { Cluster } from '../gateway/cluster/cluster.js';
import type { ClusterAuthConfig } from '../gateway/cluster/nats-auth.js';
import { attentionFor } from './attention-setup.js';

/** The keys a gateway runs from: all of `tether gateway`'s; `tether up` has no host (127.0.0.1), no TLS and no cluster. */
export type GatewayRunConfig = Omit<
  GatewayConfig,
  'host' | 'tlsCert' | 'tlsKey' | 'tlsClientCa' | 'logLevel' | 'logFormat' | keyof ClusterAuthConfig
> &
  Partial<Pick<GatewayConfig, 'host' | 'tlsCert' | 'tlsKey' | 'tlsClientCa'>> &
  Partial<ClusterAuthConfig>;

/** A gateway the CLI started: its listeners and what its authentication resolved to. */
export interface StartedGateway {
  server: GatewayServer;
  auth: GatewayAuthSetup;
  /** With `cluster` set: the gateway's membership (close it after the server). */
  cluster?: Cluster;
}

/**
 * Starts the gateway `tether gateway` and `tether up` run: its durable storage under the
 * state folder (made private before the key is read), authentication at the door (the
 * warning on stderr when it is off), the routing core with process metrics, and the
 * listeners with revocations and the `/acp` endpoint. `needSigningKey` (up): the key must be
 * able to mint tokens. `routingLogger`: the routing core's logger (default `logger`).
 */
export async function startGateway(
  c: GatewayRunConfig,
  logger: Logger,
  opts: { needSigningKey?: boolean; routingLogger?: Logger } = {},
): Promise<StartedGateway> {
  const storage = gatewayStorage(c, logger);
  const auth = gatewayAuthFrom(c, { needSigningKey: opts.needSigningKey, logger: logger.child({ component: 'oidc' }) });
  if (auth.auth.verifier === 'off') process.stderr.write(AUTH_OFF_WARNING);
  // Joined before anything listens: a bad, unreachable or unauthenticated cluster stops the gateway here.
  // NATS's modules load only for a cluster (a standalone gateway starts without them).
  const cluster = c.cluster
    ? await (await import('./cluster-join.js')).joinCluster(
        { ...c, cluster: c.cluster, clusterInsecureNoAuth: c.clusterInsecureNoAuth ?? false },
        auth,
        logger,
      )
    : undefined;
  const gateway = new Gateway({
    telemetry: await startTelemetry('tether-gateway'), // only what OTEL_* ask for; off, nothing of OpenTelemetry is loaded
    logger: opts.routingLogger ?? logger,
    store: cluster?.store ?? storage.store,
    audit: storage.audit,
    auditMembership: { perWindow: c.audit.membershipPerMinute },
    hostKeys: storage.hostKeys,
    policy: storage.policy,
    usage: storage.usage,
    limits: gatewayLimitsOf(c.limits),
    metrics: new GatewayMetrics({
      processMetrics: true,
      usage: { byPrincipal: c.usage.metricsByPrincipal, labelCap: c.usage.metricsLabelCap },
    }),
  });
  const revocations = RevocationList.inStateDir(c.stateDir, { logger });
  // Browser sign-ins outlive a restart (the state folder) and a fail-over (the cluster's bucket, below).
  const browser = auth.auth.verifier === 'off' ? undefined : auth.auth.browser;
  if (browser) BrowserSignInFile.keep(c.stateDir, browser, logger);
  let origin: string | undefined;
  const attention = await attentionFor(c, gateway, logger, () => origin, cluster?.notify).catch(async (err: unknown) => {
    await cluster?.close();
    throw err;
  });
  if (cluster) {
    try {
      await cluster.attach(gateway);
      // The usage ledger is the fleet's: budgets and `tether usage` here count turns booked on every gateway.
      await cluster.shareUsage(storage.usage, c.usage.retentionDays);
      // Revocations and host-key pins are the cluster's: made through any gateway, they hold on this one.
      storage.hostKeys.share(cluster.trust);
      await cluster.trust.shareRevocations(revocations);
      if (browser) await cluster.trust.shareBrowserSignIns(browser);
    } catch (err) {
      revocations.close();
      await cluster.close();
      throw err;
    }
  }
  const server = await startGatewayServer(gateway, {
    host: c.host,
    port: c.port,
    grpcPort: c.grpcPort,
    maxFrameBytes: c.limits.maxFrameBytes,
    logger,
    auth: auth.auth,
    metrics: c.metrics,
    tls: serverTlsOf(c),
    doorLimits: doorLimitsOf(c.limits),
    revocations,
    acp: acpEndpoint(),
    readinessChecks: cluster ? [cluster.readiness] : undefined,
    notify: attention,
  }).catch(async (err: unknown) => {
    await cluster?.close();
    throw err;
  });
  origin = new URL(server.pageUrl).origin;
  return { server, auth, cluster };
}

/** The lines both commands print first: where the gateway listens. */
export function printListening(server: GatewayServer): void {
  process.stdout.write(`gateway: ${server.url}\n`);
  process.stdout.write(`grpc: ${server.grpcUrl ?? 'off'}\n`);
}

/** The `key:` line: which key signs and verifies tokens, and whether it was created now (nothing without one). */
export function printKey(auth: GatewayAuthSetup): void {
  if (auth.keyPath) process.stdout.write(`key: ${auth.keyPath}${auth.created ? ' (created now)' : ''}\n`);
}
