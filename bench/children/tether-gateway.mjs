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
/**
 * What `tether gateway --state-dir DIR` keeps, opened as it opens it: its configuration loaded
 * by its own loader (every default, nothing from this environment), then gatewayStorage.
 */
async function storageIn(stateDir) {
  const { loadConfig } = await import('../../dist/core/config/load.js');
  const { GATEWAY_CONFIG } = await import('../../dist/gateway/config.js');
  const { gatewayStorage } = await import('../../dist/bin/gateway-storage.js');
  const { config } = loadConfig(GATEWAY_CONFIG, { flags: { 'state-dir': stateDir, port: '0' }, env: {} });
  return { ...gatewayStorage(config), auditMembership: { perWindow: config.audit.membershipPerMinute } };
}
const storage = a.state ? await storageIn(a.state) : undefined;
const gateway = new Gateway({
  telemetry: await startTelemetry('tether-gateway'),
  store: cluster?.store ?? storage?.store,
  audit: storage?.audit,
  auditMembership: storage?.auditMembership,
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
