import { DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT, DEFAULT_GRPC_PORT, GATEWAY_CONFIG } from '../../gateway/config.js';
import { AUTH_FLAGS_HELP } from '../auth-options.js';
import { printKey, printListening, startGateway } from '../gateway-start.js';
import { STORAGE_FLAGS_HELP } from '../gateway-storage.js';
import { programCommand } from '../program-command.js';
import { onShutdown } from '../shutdown.js';

export const gatewayCommand = programCommand(
  GATEWAY_CONFIG,
  {
    name: 'gateway',
    loggerName: 'gateway',
    summary: 'run a gateway that agents and clients connect to',
    usage: `Usage: tether gateway [--host ${DEFAULT_GATEWAY_HOST}] [--port ${DEFAULT_GATEWAY_PORT}] [--grpc-port ${DEFAULT_GRPC_PORT}] [--state-dir DIR | --key FILE]
                      [--jwks-url URL] [--auth on|off] [--allow-origin ORIGIN]... [--log-level info]
                      [--oidc-issuer URL --oidc-client-id ID [--oidc-client-secret-file FILE]]
                      [--cluster nats://HOST:PORT] [--config FILE]

Runs the gateway: agents dial out to it, clients connect to it, it routes sessions. Every
connection needs a token (tether token mints one with the same state folder or key).
HTTP beside the WebSocket: GET /healthz (alive), /readyz (ready: 503 says which check
failed), /metrics (Prometheus). The gRPC port also serves grpc.health.v1.Health.

Options:
  --config FILE      configuration file, JSON or YAML (env TETHER_CONFIG); see below
  --host HOST        address to listen on (default ${DEFAULT_GATEWAY_HOST})
  --port PORT        WebSocket/HTTP port (default ${DEFAULT_GATEWAY_PORT}; 0 picks a free port)
  --grpc-port PORT   gRPC port (default ${DEFAULT_GRPC_PORT}; 0 with --port 0 unless given; off: none)
  --cluster URL      join a cluster of gateways on a NATS server with JetStream
                     (nats://HOST:PORT): sessions and their history live in JetStream, agents
                     and clients may use any gateway, an agent whose gateway is lost moves to
                     another with its sessions. Absent: one gateway with its own store.
                     NATS must authenticate the gateway (one of the next four, or a TLS client
                     certificate); gateways sign what they tell each other with a key derived
                     from their shared token key (docs/deploy.md, "A cluster's NATS")
  --cluster-creds FILE           NATS credentials file (JWT and nkey seed)
  --cluster-nkey FILE            file with the NATS nkey seed
  --cluster-user USER            NATS user; password from --cluster-password-file FILE
                                 or TETHER_CLUSTER_PASSWORD
  --cluster-token-file FILE      NATS token (or TETHER_CLUSTER_TOKEN)
  --cluster-tls-ca FILE          CA (PEM) of the NATS server's certificate
  --cluster-tls-cert FILE        client certificate (PEM) for NATS, with --cluster-tls-key FILE
  --cluster-insecure-no-auth     join a NATS server without authentication (anyone who reaches
                                 it reads every session); warned at every start
${AUTH_FLAGS_HELP}
${STORAGE_FLAGS_HELP}
  --log-level LEVEL  trace|debug|info|warn|error (default info; env TETHER_LOG_LEVEL)
  --log-format F     auto|json|pretty (default auto: pretty on a terminal)
  -h, --help         show this help`,
  },
  async (c, logger) => {
    const { server, auth, cluster } = await startGateway(c, logger);
    printListening(server);
    if (cluster) process.stdout.write(`cluster: ${cluster.link.url} (gateway ${cluster.gatewayId})\n`);
    printKey(auth);
    if (auth.keyPath && auth.signingKey) {
      const where = c.keyFile ? `--key ${auth.keyPath}` : `--state-dir ${c.stateDir}`;
      process.stdout.write(`mint tokens: tether token ${where} --role client|agent --sub NAME\n`);
    }
    await onShutdown(async () => {
      await server.close();
      await cluster?.close();
    });
    return 0;
  },
);
