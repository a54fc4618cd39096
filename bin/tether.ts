#!/usr/bin/env -S node --initial-old-space-size=128
// The V8 flag above (its one definition: the bench runs our gateway and agent with what this
// line says; package.json's `start` repeats it; test/node-flags.test.ts checks both): a gateway
// or agent relaying large frames makes short-lived garbage fast, and V8's default limit for its
// old generation (a few MB above the live ≈17 MB) made it run a full collection every ≈130
// frames of 100 KB, 64 % of the gateway's time over gRPC. With 128 MB of room before the first
// one, full collections are rare: gateway CPU per 100 KB frame over gRPC 236 → 124 µs, per
// 200 B frame 4.8 → 3.9 µs in the full benchmark (docs/performance.md, stop 43; notebook, "the
// old generation's room"). The cost: ≈50 MB more resident memory after a burst of large frames.
import { asTetherError } from '../core/errors.js';
import { parseCommand, type Command } from './args.js';

/**
 * The commands in help order, each loaded only when it runs (or for the top-level help): a
 * command imports what it needs (a client needs no gateway, gRPC server or NATS), so
 * `tether run` starts in a fraction of the time loading all of them took.
 */
const COMMANDS: readonly [string, () => Promise<Command>][] = [
  ['up', async () => (await import('./commands/up.js')).upCommand],
  ['gateway', async () => (await import('./commands/gateway.js')).gatewayCommand],
  ['agent', async () => (await import('./commands/agent.js')).agentCommand],
  ['run', async () => (await import('./commands/run.js')).runCommand],
  ['chat', async () => (await import('./commands/chat.js')).chatCommand],
  ['attach', async () => (await import('./commands/attach.js')).attachCommand],
  ['move', async () => (await import('./commands/move.js')).moveCommand],
  ['diff', async () => (await import('./commands/diff.js')).diffCommand],
  ['files', async () => (await import('./commands/files.js')).filesCommand],
  ['agents', async () => (await import('./commands/list.js')).agentsCommand],
  ['sessions', async () => (await import('./commands/list.js')).sessionsCommand],
  ['worktrees', async () => (await import('./commands/list.js')).worktreesCommand],
  ['inbox', async () => (await import('./commands/inbox.js')).inboxCommand],
  ['audit', async () => (await import('./commands/audit.js')).auditCommand],
  ['usage', async () => (await import('./commands/usage.js')).usageCommand],
  ['token', async () => (await import('./commands/token.js')).tokenCommand],
  ['revoke', async () => (await import('./commands/revoke.js')).revokeCommand],
  ['notify', async () => (await import('./commands/notify.js')).notifyCommand],
  ['login', async () => (await import('./commands/login.js')).loginCommand],
  ['logout', async () => (await import('./commands/login.js')).logoutCommand],
  ['login-link', async () => (await import('./commands/login-link.js')).loginLinkCommand],
  ['keygen', async () => (await import('./commands/keygen.js')).keygenCommand],
  ['config', async () => (await import('./commands/config.js')).configCommand],
  ['acp', async () => (await import('./commands/acp.js')).acpCommand],
];

/** The top-level help: loads every command for its summary (help is rare; runs load one). */
async function topHelp(): Promise<string> {
  const commands = await Promise.all(COMMANDS.map(([, load]) => load()));
  return `tether: a remote gateway for coding-agent CLIs (Claude Code first)

Usage: tether <command> [options]

Commands:
${commands.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`).join('\n')}

Run "tether <command> --help" for a command's options.
Environment: TETHER_GATEWAY, TETHER_TOKEN, TETHER_AGENT, TETHER_STATE_DIR stand in for --gateway, --token, --agent, --state-dir.
gateway, agent and up also read --config FILE (or TETHER_CONFIG) and TETHER_* variables: see "tether config --keys".`;
}

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
    process.stdout.write((await topHelp()) + '\n');
    return name ? 0 : 2;
  }
  if (name === '--version') {
    process.stdout.write('tether 0.1.0\n');
    return 0;
  }
  const load = COMMANDS.find(([n]) => n === name)?.[1];
  if (!load) {
    process.stderr.write(`tether: unknown command "${name}"\n\n${await topHelp()}\n`);
    return 2;
  }
  const cmd = await load();
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
