#!/usr/bin/env node
/**
 * tether-claude: a stand-in for the `claude` executable in stream-json mode that runs the
 * engine on a remote agent. Point an Agent SDK at it (`pathToClaudeCodeExecutable` in
 * TypeScript, `cli_path` in Python) and nothing else in the app changes.
 */
import { constants } from 'node:os';
import { startRemoteEngine, type RemoteExit } from '../client/remote-engine.js';
import { standardDialers } from '../core/link/dial.js';
import { remoteEngineVersion } from '../client/remote-version.js';
import { createLogger } from '../core/logging.js';

const USAGE = `tether-claude: the Claude Code CLI's stdin/stdout (stream-json), with the engine on a remote agent

Usage: an Agent SDK starts it in place of \`claude\`:
  TypeScript  query({ prompt, options: { pathToClaudeCodeExecutable: '<path>/tether-claude.js', env: {...process.env, TETHER_...} } })
  Python      ClaudeAgentOptions(cli_path='tether-claude', env={...})

Every argument is the SDK's: the ones with a session option of their own (--model,
--permission-mode, --allowedTools, --disallowedTools, --resume, --system-prompt,
--append-system-prompt, --include-partial-messages) become that option, local-only ones
(--debug-file, --debug, --debug-to-stderr) are dropped, the rest are passed to the engine
if the agent's allow list accepts them. The SDK's own initialize is the engine's one. stdin
EOF ends the remote session; the exit code is the remote engine's. SIGTERM sends SIGTERM to
the remote engine at once (as to a local CLI); SIGINT stops the session the staged way.

  tether-claude -v | --version   the remote engine's version, as \`claude -v\` prints it
                                 (asks the gateway; needs TETHER_GATEWAY and TETHER_AGENT)

Environment:
  TETHER_GATEWAY    gateway URL (ws://, wss://, grpc://, grpcs://), or    required
                    several, comma-separated (gateways of one cluster)
  TETHER_AGENT      agent that runs the engine                            required
  TETHER_TOKEN      client token
  TETHER_CWD        working folder on the agent's machine (default: the agent's)
  TETHER_LOG_LEVEL  log level on stderr (default warn; debug shows the gateway's own frames)

The engine's environment (HOME, API keys, ANTHROPIC_BASE_URL, ...) is the agent's. Of the
env the SDK passes to this process only its switches reach the engine
(CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING and the others docs/compatibility.md lists).`;

function env(name: string): string | undefined {
  const v = process.env[name];
  return v !== undefined && v !== '' ? v : undefined;
}

/** The exit code a shell would report for this exit. */
function exitCodeOf(exit: RemoteExit): number {
  if (exit.code !== null) return exit.code;
  if (exit.signal) return 128 + (constants.signals[exit.signal] ?? 0);
  return 1;
}

async function main(argv: string[]): Promise<number> {
  if (argv.length === 1 && (argv[0] === '--help' || argv[0] === '-h')) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const version = argv.length === 1 && (argv[0] === '--version' || argv[0] === '-v');
  const gateway = env('TETHER_GATEWAY');
  const agent = env('TETHER_AGENT');
  const missing = [gateway ? undefined : 'TETHER_GATEWAY', agent ? undefined : 'TETHER_AGENT'].filter(Boolean);
  if (!gateway || !agent) {
    process.stderr.write(`tether-claude: missing ${missing.join(' and ')} in the environment (tether-claude --help explains them)\n`);
    return 1;
  }
  const logger = createLogger({ name: 'tether-claude', level: env('TETHER_LOG_LEVEL') ?? 'warn' });
  const dialers = standardDialers();
  if (version) {
    process.stdout.write(`${await remoteEngineVersion({ gateway, agent, token: env('TETHER_TOKEN'), dialers, logger })}\n`);
    return 0;
  }
  // The SDK may close its end of our stdout first; that is not a crash.
  process.stdout.on('error', (err) => logger.debug({ err: String(err) }, 'stdout closed'));
  const engine = startRemoteEngine({ gateway, agent, token: env('TETHER_TOKEN'), cwd: env('TETHER_CWD'), dialers, logger }, argv, {
    input: process.stdin,
    output: process.stdout,
    diagnostics: (text) => void process.stderr.write(text),
    env: process.env,
  });
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    // First signal: stop the remote session (SIGTERM reaches the engine at once, as it would a
    // local CLI) and exit with the engine's code. Second: leave now.
    if (signals++ > 0) process.exit(128 + (constants.signals[signal] ?? 0));
    engine.stop(signal === 'SIGTERM' ? 'SIGTERM' : 'eof');
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return exitCodeOf(await engine.exited);
}

main(process.argv.slice(2)).then(
  (code) => process.stdout.write('', () => process.exit(code)),
  (err) => {
    process.stderr.write(`tether-claude: ${err instanceof Error ? err.message : String(err)}\n`, () => process.exit(1));
  },
);
