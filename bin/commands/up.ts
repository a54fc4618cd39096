import { Agent } from '../../agent/agent.js';
import { createLogger } from '../../core/logging.js';
import { Gateway } from '../../gateway/gateway.js';
import { startGatewayServer } from '../../gateway/server.js';
import { grpcPortOf, portOf, type Command } from '../args.js';
import { onShutdown } from '../shutdown.js';
import { engineChoice } from './agent.js';

export const upCommand: Command = {
  name: 'up',
  summary: 'run a gateway and a local agent in one command (what npm start runs)',
  usage: `Usage: tether up [--port 7800] [--grpc-port 7801] [--engine auto|claude|demo] [--cwd DIR] [--state-dir DIR]

Starts a gateway on 127.0.0.1 and one local agent named "local" connected to it. Prints
the gateway URL and a client token. Ctrl-C or SIGTERM stops everything, engines included.

Options:
  --port PORT        WebSocket/HTTP port (default 7800; 0 picks a free port)
  --grpc-port PORT   gRPC port (default 7801; 0 with --port 0 unless given)
  --engine KIND      auto (default: claude if on PATH, else the built-in demo), claude or demo
  --engine-command PATH  the Claude Code executable (env TETHER_ENGINE_COMMAND)
  --cwd DIR          working folder for the local agent's sessions (default: current folder)
  --state-dir DIR    folder for keys and session state (default ~/.tether)
  --log-level LEVEL  trace|debug|info|warn|error (default warn)
  -h, --help         show this help`,
  options: {
    port: { type: 'string' },
    'grpc-port': { type: 'string' },
    engine: { type: 'string' },
    'engine-command': { type: 'string' },
    cwd: { type: 'string' },
    'state-dir': { type: 'string' },
    'log-level': { type: 'string' },
  },
  async run(v) {
    const logger = createLogger({ name: 'tether', level: (v['log-level'] as string | undefined) ?? process.env.TETHER_LOG_LEVEL ?? 'warn' });
    const gateway = new Gateway({ logger: logger.child({ program: 'gateway' }) });
    const server = await startGatewayServer(gateway, { port: portOf(v.port, 7800), grpcPort: grpcPortOf(v), logger });
    const agent = new Agent({
      gateway: server.url,
      name: 'local',
      engine: engineChoice(v.engine),
      engineCommand: v['engine-command'] as string | undefined,
      cwd: v.cwd as string | undefined,
      logger: logger.child({ program: 'agent' }),
    });
    await agent.start();
    process.stdout.write(`gateway: ${server.url}\n`);
    process.stdout.write(`grpc: ${server.grpcUrl}\n`);
    process.stdout.write(`token: none (authentication is not enabled in this build; --token is accepted and ignored)\n`);
    process.stdout.write(`agent: local engine: ${agent.engines.explanation}\n`);
    process.stdout.write(`try: tether run --gateway ${server.url} --agent local "hello"\n`);
    await onShutdown(async () => {
      await agent.shutdown();
      await server.close();
    });
    return 0;
  },
};
