import { describe, expect, it } from 'vitest';
import { parseCommand, type Command } from '../bin/args.js';
import { acpCommand } from '../bin/commands/acp.js';
import { attachCommand } from '../bin/commands/attach.js';
import { auditCommand } from '../bin/commands/audit.js';
import { chatCommand } from '../bin/commands/chat.js';
import { diffCommand } from '../bin/commands/diff.js';
import { filesCommand } from '../bin/commands/files.js';
import { agentsCommand, sessionsCommand } from '../bin/commands/list.js';
import { runCommand } from '../bin/commands/run.js';
import { usageCommand } from '../bin/commands/usage.js';
import { connectionHelp, TLS_CLIENT_HELP, TOKEN_FILE_HELP } from '../bin/connection-flags.js';

/**
 * Every client command reaches a gateway through the one set of connection flags
 * (bin/connection-flags.ts): each takes all of them and documents each, in its own column.
 */
const CLIENT_COMMANDS: Command[] = [
  runCommand,
  chatCommand,
  attachCommand,
  agentsCommand,
  sessionsCommand,
  auditCommand,
  acpCommand,
  diffCommand,
  filesCommand,
  usageCommand,
];
const CONNECTION_ARGS = ['--gateway', 'ws://gw:7800', '--token', 't', '--ca', 'ca.pem', '--tls-cert', 'c.pem', '--tls-key', 'k.pem'];

describe('connection flags', () => {
  it.each(CLIENT_COMMANDS.map((c) => [c.name, c] as const))(
    'tether %s takes and documents --gateway, --token and the TLS flags',
    (_name, cmd) => {
      const { values } = parseCommand(cmd, CONNECTION_ARGS);
      expect(values).toMatchObject({ gateway: ['ws://gw:7800'], token: 't', ca: 'ca.pem', 'tls-cert': 'c.pem', 'tls-key': 'k.pem' });
      const column = /^ {2}--gateway URL +/m.exec(cmd.usage)?.[0].length;
      expect(column, `${cmd.name} --help lists --gateway`).toBeDefined();
      expect(cmd.usage).toContain(connectionHelp(column!));
      expect(cmd.usage).toContain(TLS_CLIENT_HELP);
    },
  );

  it('chat and attach, which keep a session open, also take --token-file', () => {
    for (const cmd of [chatCommand, attachCommand]) {
      expect(parseCommand(cmd, ['--token-file', 'f']).values['token-file']).toBe('f');
      expect(cmd.usage).toContain(TOKEN_FILE_HELP);
    }
    expect(() => parseCommand(runCommand, ['--token-file', 'f'])).toThrow(/token-file/);
  });

  it('prints the two lines, --gateway saying it takes several', () => {
    expect(connectionHelp(18)).toBe(
      '  --gateway URL   gateway URL (env TETHER_GATEWAY); several: repeat or use commas\n  --token TOKEN   client token (env TETHER_TOKEN; else the one tether login kept)',
    );
    expect(connectionHelp(27)).toBe(
      '  --gateway URL            gateway URL (env TETHER_GATEWAY); several: repeat or use commas\n  --token TOKEN            client token (env TETHER_TOKEN; else the one tether login kept)',
    );
  });

  it('--gateway repeats: every client command gets each one', () => {
    for (const cmd of CLIENT_COMMANDS)
      expect(parseCommand(cmd, ['--gateway', 'ws://a:7800', '--gateway', 'grpc://b:7801']).values.gateway).toEqual([
        'ws://a:7800',
        'grpc://b:7801',
      ]);
  });
});
