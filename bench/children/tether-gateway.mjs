/**
 * Our gateway as a bench child: the routing core and its WebSocket + gRPC listeners on
 * 127.0.0.1 (ports picked by the OS), authentication off. Limits that would refuse the
 * benchmark's own load (members per session, sessions per principal, connections per gateway
 * and per address: every bench client comes from 127.0.0.1) are raised; everything else is
 * the default. With `--cluster nats://HOST:PORT` it joins a cluster on that NATS server, as
 * `tether gateway --cluster` does (its sessions then live in JetStream; the bench's NATS asks
 * for no authentication; `--cluster-secret` is the gateways' shared HS256 secret, hex,
 * the fabric's MAC key is derived from). Traces when the OTEL_* variables it was started with
 * ask for it, as `tether gateway` does. `--port` / `--grpc-port` (default 0: the OS picks)
 * let a killed gateway come back on its old ports. With `--state DIR` it keeps its state as
 * `tether gateway --state-dir DIR` does (gatewayStorage: the file session store, the audit
 * trail flushed to disk per record, the usage ledger); without it, all in memory. Answers
 * cpu / mem / stats over IPC.
 */
import { Gateway } from '../../dist/gateway/gateway.js';
import { startGatewayServer } from '../../dist/gateway/server.js';
import { silentLogger } from '../../dist/core/logging.js';
import { startTelemetry } from '../../dist/core/telemetry/telemetry.js';
import { argsOf, serve } from '../lib/child.mjs';

const a = argsOf();
// Loaded only for a cluster, so the other figures run on a build without the cluster modules.
async function joinCluster(url, secret) {
  const { Cluster } = await import('../../dist/gateway/cluster/cluster.js');
  const { FabricMac } = await import('../../dist/gateway/cluster/fabric-mac.js');
  const { natsDialOf } = await import('../../dist/gateway/cluster/nats-auth.js');
  const { parseKey } = await import('../../dist/core/auth/keys.js');
  const mac = FabricMac.fromTokenKey(parseKey(JSON.stringify({ kty: 'oct', k: Buffer.from(secret, 'hex').toString('base64url') })));
  return Cluster.join(natsDialOf({ cluster: url, clusterInsecureNoAuth: true }), mac, silentLogger);
}
const cluster = a.cluster ? await joinCluster(a.cluster, a['cluster-secret']) : undefined;
const storage = a.state ? await storageIn(a.state) : undefined;
/** What `tether gateway` keeps under its state folder, with its defaults (bin/gateway-storage.ts). */
async function storageIn(stateDir) {
  const { gatewayStorage } = await import('../../dist/bin/gateway-storage.js');
  const { AUDIT_ROTATION_DEFAULTS } = await import('../../dist/gateway/audit/audit-log.js');
  const { DEFAULT_USAGE_RETENTION_DAYS } = await import('../../dist/gateway/usage/usage-ledger.js');
  const usage = { retentionDays: DEFAULT_USAGE_RETENTION_DAYS };
  return gatewayStorage({ stateDir, auditLog: `${stateDir}/audit.jsonl`, audit: AUDIT_ROTATION_DEFAULTS, usage });
}
const gateway = new Gateway({
  telemetry: await startTelemetry('tether-gateway'),
  store: cluster?.store ?? storage?.store,
  audit: storage?.audit,
  usage: storage?.usage,
  limits: {
    maxMembers: 20_000,
    maxSessionsPerPrincipal: 1_000_000,
  },
});
await cluster?.attach(gateway);
const server = await startGatewayServer(gateway, {
  host: '127.0.0.1',
  port: Number(a.port ?? 0),
  grpcPort: Number(a['grpc-port'] ?? 0),
  doorLimits: { maxConnections: 1_000_000, maxConnectionsPerAddress: 1_000_000 },
});

const { ready } = serve(
  {
    stats: () => ({
      sessions: gateway.directory.sessions.size,
      agents: gateway.directory.agents.size,
      clients: gateway.directory.clients.size,
    }),
  },
  {
    onExit: async () => {
      await server.close();
      await cluster?.close();
    },
  },
);
ready({ url: server.url, grpcUrl: server.grpcUrl, gatewayId: gateway.id });
