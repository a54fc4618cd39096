#!/usr/bin/env node
import { asTetherError } from '../core/errors.js';
import { parseCommand, type Command } from './args.js';
import { acpCommand } from './commands/acp.js';
import { agentCommand } from './commands/agent.js';
import { auditCommand } from './commands/audit.js';
import { attachCommand } from './commands/attach.js';
import { chatCommand } from './commands/chat.js';
import { configCommand } from './commands/config.js';
import { gatewayCommand } from './commands/gateway.js';
import { keygenCommand } from './commands/keygen.js';
import { loginLinkCommand } from './commands/login-link.js';
import { agentsCommand, sessionsCommand } from './commands/list.js';
import { revokeCommand } from './commands/revoke.js';
import { runCommand } from './commands/run.js';
import { tokenCommand } from './commands/token.js';
import { upCommand } from './commands/up.js';

const commands: Command[] = [upCommand, gatewayCommand, agentCommand, runCommand, chatCommand, attachCommand, agentsCommand, sessionsCommand, auditCommand, tokenCommand, revokeCommand, loginLinkCommand, keygenCommand, configCommand, acpCommand];

const TOP_HELP = `tether: a remote gateway for coding-agent CLIs (Claude Code first)

Usage: tether <command> [options]

Commands:
${commands.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`).join('\n')}

Run "tether <command> --help" for a command's options.
Environment: TETHER_GATEWAY, TETHER_TOKEN, TETHER_AGENT, TETHER_STATE_DIR stand in for --gateway, --token, --agent, --state-dir.
gateway, agent and up also read --config FILE (or TETHER_CONFIG) and TETHER_* variables: see "tether config --keys".`;

/**
 * grpc-js passes an IP address as the TLS server name for grpcs://127.0.0.1, which Node
 * flags once per process (DEP0123). Certificate checks are unaffected; keep the CLI's
 * stderr for things a user must read.
 */
const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  const code = typeof rest[0] === 'object' && rest[0] !== null ? (rest[0] as { code?: string }).code : rest[1];
  if (code === 'DEP0123') return;
  (emitWarning as (...a: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(TOP_HELP + '\n');
    return name ? 0 : 2;
  }
  if (name === '--version') {
    process.stdout.write('tether 0.1.0\n');
    return 0;
  }
  const cmd = commands.find((c) => c.name === name);
  if (!cmd) {
    process.stderr.write(`tether: unknown command "${name}"\n\n${TOP_HELP}\n`);
    return 2;
  }
  const { values, positionals, help } = parseCommand(cmd, rest);
  if (help) {
    process.stdout.write(cmd.usage + '\n');
    return 0;
  }
  return cmd.run(values, positionals);
}

main(process.argv.slice(2)).then(
  // Exit explicitly once stdout is flushed: a command is done when it returns, whatever
  // idle handles a library left behind.
  (code) => process.stdout.write('', () => process.exit(code)),
  (err) => {
    const e = asTetherError(err);
    process.stderr.write(`tether: ${e.message}\n`, () => process.exit(e.code === 'INVALID_ARGUMENT' ? 2 : 1));
  },
);
