import { createLogger } from '../../core/logging.js';
import { Gateway } from '../../gateway/gateway.js';
import { startGatewayServer } from '../../gateway/server.js';
import { resolveStateDir } from '../../core/auth/state-dir.js';
import { grpcPortOf, portOf, type Command } from '../args.js';
import { AUTH_FLAGS, AUTH_FLAGS_HELP, AUTH_OFF_WARNING, gatewayAuthFrom } from '../auth-options.js';
import { onShutdown } from '../shutdown.js';
import { gatewayStorage, STORAGE_FLAGS, STORAGE_FLAGS_HELP } from '../gateway-storage.js';

export const gatewayCommand: Command = {
  name: 'gateway',
  summary: 'run a gateway that agents and clients connect to',
  usage: `Usage: tether gateway [--host 127.0.0.1] [--port 7800] [--grpc-port 7801] [--state-dir DIR | --key FILE]
                      [--jwks-url URL] [--auth on|off] [--allow-origin ORIGIN]... [--log-level info]

Runs the gateway: agents dial out to it, clients connect to it, it routes sessions. Every
connection needs a token (tether token mints one with the same state folder or key).

Options:
  --host HOST        address to listen on (default 127.0.0.1)
  --port PORT        WebSocket/HTTP port (default 7800; 0 picks a free port)
  --grpc-port PORT   gRPC port (default 7801; 0 with --port 0 unless given)
${AUTH_FLAGS_HELP}
${STORAGE_FLAGS_HELP}
  --log-level LEVEL  trace|debug|info|warn|error (default info; env TETHER_LOG_LEVEL)
  -h, --help         show this help`,
  options: {
    host: { type: 'string' },
    port: { type: 'string' },
    'grpc-port': { type: 'string' },
    ...AUTH_FLAGS,
    ...STORAGE_FLAGS,
    'log-level': { type: 'string' },
  },
  async run(v) {
    const logger = createLogger({ name: 'gateway', level: v['log-level'] as string | undefined });
    const setup = gatewayAuthFrom(v);
    if (setup.auth.verifier === 'off') process.stderr.write(AUTH_OFF_WARNING);
    const storage = gatewayStorage(v);
    const gateway = new Gateway({ logger, store: storage.store, audit: storage.audit });
    const server = await startGatewayServer(gateway, { host: (v.host as string) ?? '127.0.0.1', port: portOf(v.port, 7800), grpcPort: grpcPortOf(v), logger, auth: setup.auth });
    process.stdout.write(`gateway: ${server.url}\n`);
    process.stdout.write(`grpc: ${server.grpcUrl}\n`);
    if (setup.keyPath) {
      process.stdout.write(`key: ${setup.keyPath}${setup.created ? ' (created now)' : ''}\n`);
      const where = v.key ? `--key ${setup.keyPath}` : `--state-dir ${resolveStateDir(v['state-dir'] as string | undefined)}`;
      if (setup.signingKey) process.stdout.write(`mint tokens: tether token ${where} --role client|agent --sub NAME\n`);
    }
    await onShutdown(() => server.close());
    return 0;
  },
};
