import { createLogger } from '../../core/logging.js';
import { doorLimitsOf, GATEWAY_CONFIG, gatewayLimitsOf, serverTlsOf } from '../../gateway/config.js';
import { RevocationList } from '../../gateway/revocations.js';
import { Gateway } from '../../gateway/gateway.js';
import { GatewayMetrics } from '../../gateway/metrics.js';
import { startGatewayServer } from '../../gateway/server.js';
import type { Command } from '../args.js';
import { AUTH_FLAGS_HELP, AUTH_OFF_WARNING, gatewayAuthFrom } from '../auth-options.js';
import { onShutdown } from '../shutdown.js';
import { gatewayStorage, STORAGE_FLAGS_HELP } from '../gateway-storage.js';
import { configOptions, configUsage, loadProgramConfig } from '../program-config.js';
import { acpEndpoint } from '../acp-endpoint.js';

export const gatewayCommand: Command = {
  name: 'gateway',
  summary: 'run a gateway that agents and clients connect to',
  usage: `Usage: tether gateway [--host 127.0.0.1] [--port 7800] [--grpc-port 7801] [--state-dir DIR | --key FILE]
                      [--jwks-url URL] [--auth on|off] [--allow-origin ORIGIN]... [--log-level info]
                      [--config FILE]

Runs the gateway: agents dial out to it, clients connect to it, it routes sessions. Every
connection needs a token (tether token mints one with the same state folder or key).
HTTP beside the WebSocket: GET /healthz (alive), /readyz (ready: 503 says which check
failed), /metrics (Prometheus). The gRPC port also serves grpc.health.v1.Health.

Options:
  --config FILE      configuration file, JSON or YAML (env TETHER_CONFIG); see below
  --host HOST        address to listen on (default 127.0.0.1)
  --port PORT        WebSocket/HTTP port (default 7800; 0 picks a free port)
  --grpc-port PORT   gRPC port (default 7801; 0 with --port 0 unless given; off: none)
${AUTH_FLAGS_HELP}
${STORAGE_FLAGS_HELP}
  --log-level LEVEL  trace|debug|info|warn|error (default info; env TETHER_LOG_LEVEL)
  --log-format F     auto|json|pretty (default auto: pretty on a terminal)
  -h, --help         show this help

${configUsage(GATEWAY_CONFIG)}`,
  options: configOptions(GATEWAY_CONFIG),
  async run(v) {
    const { config: c } = loadProgramConfig(GATEWAY_CONFIG, v); // every problem at once, before anything opens
    const logger = createLogger({ name: 'gateway', level: c.logLevel, format: c.logFormat });
    const storage = gatewayStorage(c, logger); // the state folder is made private before the key is read
    const setup = gatewayAuthFrom(c);
    if (setup.auth.verifier === 'off') process.stderr.write(AUTH_OFF_WARNING);
    const gateway = new Gateway({ logger, store: storage.store, audit: storage.audit, hostKeys: storage.hostKeys, policy: storage.policy, limits: gatewayLimitsOf(c.limits), metrics: new GatewayMetrics({ processMetrics: true }) });
    const server = await startGatewayServer(gateway, {
      host: c.host,
      port: c.port,
      grpcPort: c.grpcPort,
      maxFrameBytes: c.limits.maxFrameBytes,
      logger,
      auth: setup.auth,
      metrics: c.metrics,
      tls: serverTlsOf(c),
      doorLimits: doorLimitsOf(c.limits),
      revocations: RevocationList.inStateDir(c.stateDir, { logger }),
      acp: acpEndpoint(),
    });
    process.stdout.write(`gateway: ${server.url}\n`);
    process.stdout.write(`grpc: ${server.grpcUrl ?? 'off'}\n`);
    if (setup.keyPath) {
      process.stdout.write(`key: ${setup.keyPath}${setup.created ? ' (created now)' : ''}\n`);
      const where = c.keyFile ? `--key ${setup.keyPath}` : `--state-dir ${c.stateDir}`;
      if (setup.signingKey) process.stdout.write(`mint tokens: tether token ${where} --role client|agent --sub NAME\n`);
    }
    await onShutdown(() => server.close());
    return 0;
  },
};
