/** What chat and attach share once they hold a session: their options, driving it (pipe mode or the terminal client) and reporting link changes. */

import { runPipe } from '../client/pipe-mode.js';
import type { RemoteSession } from '../client/remote-session.js';
import { TerminalClient } from '../client/terminal-client.js';
import type { GatewayClient } from '../client/gateway-client.js';
import { tetherEvent } from '../core/protocol/events.js';
import type { LinkStatus } from '../core/link/link.js';
import { CONNECTION_OPTIONS, TOKEN_FILE_OPTION } from './connection-flags.js';

/** Options chat and attach share: the connection flags, --token-file and --json. */
export const SESSION_DRIVE_OPTIONS = { ...CONNECTION_OPTIONS, ...TOKEN_FILE_OPTION, json: { type: 'boolean' } } as const;

/** Drives a session in pipe mode (--json) or with the interactive terminal client. */
export async function drive(client: GatewayClient, session: RemoteSession, json: boolean, stopOnEof: boolean): Promise<number> {
  if (json) {
    const onSigint = () => {
      void client.close().then(() => process.exit(130));
    };
    process.on('SIGINT', onSigint);
    return runPipe(session, process.stdin, process.stdout, { stopOnEof });
  }
  const tty = process.stdout.isTTY === true && process.stdin.isTTY === true;
  const ui = new TerminalClient(session, { input: process.stdin, output: process.stdout, tty, self: client.principal });
  if (!tty) process.on('SIGINT', () => ui.ctrlC());
  return ui.run();
}

/** Prints link changes: to stderr for people, as tether events in pipe mode. */
export function linkReporter(json: boolean) {
  let connects = 0;
  let lastDown: string | undefined;
  return (status: LinkStatus) => {
    if (status.state === 'connected' && connects++ === 0) return; // the first connect is not news
    // Which gateway is news only when there are several (the dead one is named in the error).
    const message =
      status.state === 'down'
        ? `link down (${status.error.message}); retrying${status.nextUrl !== status.url ? ` ${status.nextUrl}` : ''} in ${status.retryInMs} ms`
        : status.state === 'connected'
          ? `link up${lastDown && status.url !== lastDown ? ` (${status.url})` : ''}`
          : undefined;
    if (status.state === 'down') lastDown = status.url;
    if (!message) return;
    const e = tetherEvent({ subtype: 'link', status: status.state === 'down' ? 'down' : 'connected', message });
    if (json) process.stdout.write(JSON.stringify(e) + '\n');
    else process.stderr.write(`* ${message}\n`);
  };
}
