import { userInfo } from 'node:os';
import { startTelemetry } from '../../core/telemetry/telemetry.js';
import { DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT, DEFAULT_GRPC_PORT } from '../../gateway/config.js';
import { Agent } from '../../agent/agent.js';
import { EngineSet } from '../../agent/engine-set.js';
import { standardDialers } from '../../core/link/dial.js';
import { enginePoliciesOf } from '../../agent/config.js';
import { MAX_TTL_SECONDS } from '../../core/auth/duration.js';
import { LOGIN_CODE_TTL_SECONDS, mintLoginCode } from '../../core/auth/login-codes.js';
import { mintToken } from '../../core/auth/mint.js';
import { AUTH_FLAGS_HELP } from '../auth-options.js';
import { printKey, printListening, startGateway } from '../gateway-start.js';
import { STORAGE_FLAGS_HELP } from '../gateway-storage.js';
import { programCommand } from '../program-command.js';
import { onShutdown } from '../shutdown.js';
import { printSignIn, signInUrl } from '../sign-in-link.js';
import { UP_CONFIG } from '../up-config.js';

/** Lifetime of the client token `tether up` prints. */
const UP_CLIENT_TOKEN_TTL_SECONDS = 24 * 3600;
/** Lifetime of the in-process agent's token, the longest a token may have (never printed; it only reconnects to this process). */
const UP_AGENT_TOKEN_TTL_SECONDS = MAX_TTL_SECONDS;

export const upCommand = programCommand(
  UP_CONFIG,
  {
    name: 'up',
    loggerName: 'tether',
    summary: 'run a gateway and a local agent in one command (what npm start runs)',
    usage: `Usage: tether up [--port ${DEFAULT_GATEWAY_PORT}] [--grpc-port ${DEFAULT_GRPC_PORT}] [--engine auto|claude|demo] [--cwd DIR] [--state-dir DIR]
                 [--key FILE] [--jwks-url URL] [--auth on|off] [--allow-origin ORIGIN]... [--config FILE]

Starts a gateway on ${DEFAULT_GATEWAY_HOST} and one local agent named "local" connected to it. Prints
the gateway URL, a client token (valid 24 h, create + control on every agent; pass it as
--token or TETHER_TOKEN) and a sign-in link for the web page at http://${DEFAULT_GATEWAY_HOST}:PORT/
(single use, valid 5 min; tether login-link mints more). The key is created in the state folder on first run; the local
agent gets its own agent token. Ctrl-C or SIGTERM stops everything, engines included.

Options:
  --config FILE      configuration file, JSON or YAML (env TETHER_CONFIG); see below
  --port PORT        WebSocket/HTTP port (default ${DEFAULT_GATEWAY_PORT}; 0 picks a free port)
  --grpc-port PORT   gRPC port (default ${DEFAULT_GRPC_PORT}; 0 with --port 0 unless given)
  --engine KIND      auto (default: claude if on PATH, else the built-in demo), claude or demo
  --engine-command PATH  the Claude Code executable (env TETHER_ENGINE_COMMAND)
  --cwd DIR          working folder for the local agent's sessions (default: current folder)
  --allow-engine-flag FLAG  an engine flag sessions may use although it runs programs, loads
                     code or settings, or reaches files beyond the session folder (repeatable)
  --allow-engine-control SUBTYPE  an engine control request a session's owner may send although
                     it starts programs, loads code or settings (repeatable; as for tether agent)
  --allow-bypass-permissions  sessions may run tools without asking (bypassPermissions)
  --engine-env KEY=VALUE, --engine-env-deny GLOB, --engine-user NAME: as for tether agent
${AUTH_FLAGS_HELP}
${STORAGE_FLAGS_HELP}
  --log-level LEVEL  trace|debug|info|warn|error (default warn)
  --log-format F     auto|json|pretty (default auto: pretty on a terminal)
  -h, --help         show this help`,
  },
  async (c, logger) => {
    const { server, auth } = await startGateway(c, logger, { needSigningKey: true, routingLogger: logger.child({ program: 'gateway' }) });
    const key = auth.signingKey;
    const agentToken = key
      ? await mintToken({ key, kind: 'agent', sub: 'local', agent: 'local', ttlSeconds: UP_AGENT_TOKEN_TTL_SECONDS })
      : undefined;
    const clientToken = key
      ? await mintToken({ key, kind: 'client', sub: localUser(), ttlSeconds: UP_CLIENT_TOKEN_TTL_SECONDS })
      : undefined;
    const agent = new Agent({
      telemetry: await startTelemetry('tether-agent'),
      gateway: server.url,
      name: 'local',
      token: agentToken,
      engine: c.engine,
      engineCommand: c.engineCommand,
      cwd: c.cwd,
      initializeTimeoutMs: c.initializeTimeoutMs,
      eofGraceMs: c.engineEofGraceMs,
      termGraceMs: c.engineTermGraceMs,
      ...enginePoliciesOf(c),
      dialers: standardDialers(),
      engineSet: EngineSet.killedOnExit(),
      logger: logger.child({ program: 'agent' }),
    });
    await agent.start();
    printListening(server);
    process.stdout.write(`token: ${clientToken ?? 'none (authentication is off)'}\n`);
    if (key)
      printSignIn(
        (t) => process.stdout.write(t),
        signInUrl(server.pageUrl, await mintLoginCode(key, { sub: localUser() })),
        LOGIN_CODE_TTL_SECONDS,
      );
    else process.stdout.write(`web: ${server.pageUrl}\n`);
    printKey(auth);
    process.stdout.write(`agent: local engine: ${agent.engines.explanation}\n`);
    process.stdout.write(
      `try: ${clientToken ? 'TETHER_TOKEN=<the token above> ' : ''}tether run --gateway ${server.url} --agent local "hello"\n`,
    );
    await onShutdown(async () => {
      await agent.shutdown();
      await server.close();
    });
    return 0;
  },
);

/** The subject of the printed client token: the OS user name. */
function localUser(): string {
  try {
    return userInfo().username || 'local-user';
  } catch {
    return 'local-user';
  }
}
