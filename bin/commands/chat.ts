import { runPipe } from '../../client/pipe-mode.js';
import type { RemoteSession } from '../../client/remote-session.js';
import { TerminalClient } from '../../client/terminal-client.js';
import type { GatewayClient } from '../../client/gateway-client.js';
import { TetherError } from '../../core/errors.js';
import { tetherEvent } from '../../core/protocol/events.js';
import { pick, required, type Command } from '../args.js';
import { connectFrom, connectionHelp, CONNECTION_OPTIONS, TLS_CLIENT_HELP, TOKEN_FILE_HELP, TOKEN_FILE_OPTION } from '../connection-flags.js';
import { printCreateProgress } from '../create-progress.js';

/** Options chat and attach share: the connection flags, --token-file and --json. */
const common = { ...CONNECTION_OPTIONS, ...TOKEN_FILE_OPTION, json: { type: 'boolean' } } as const;

/** Drives a session in pipe mode (--json) or with the interactive terminal client. */
async function drive(client: GatewayClient, session: RemoteSession, json: boolean, stopOnEof: boolean): Promise<number> {
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
function linkReporter(json: boolean) {
  let connects = 0;
  return (status: { state: string; retryInMs?: number; error?: { message: string } }) => {
    if (status.state === 'connected' && connects++ === 0) return; // the first connect is not news
    const message =
      status.state === 'down' ? `link down (${status.error?.message}); retrying in ${status.retryInMs} ms` : status.state === 'connected' ? 'link up' : undefined;
    if (!message) return;
    const e = tetherEvent({ subtype: 'link', status: status.state === 'down' ? 'down' : 'connected', message });
    if (json) process.stdout.write(JSON.stringify(e) + '\n');
    else process.stderr.write(`* ${message}\n`);
  };
}

export const chatCommand: Command = {
  name: 'chat',
  summary: 'start a session on an agent and talk to it (interactive, or --json for scripts)',
  usage: `Usage: tether chat --agent NAME [--token-file FILE] [--cwd DIR] [--model M] [--permission-mode MODE] [--json [--client-initialize]]

Starts a new session on the agent and attaches to it as its owner.
Interactive: type prompts; permission prompts ask y / n / a (always for this session);
AskUserQuestion takes a number or your own answer; Ctrl-C interrupts the turn, a second
Ctrl-C leaves (the session keeps running; tether attach brings you back). /model M, /mode M,
/quit work too.
--json (pipe mode): reads JSON lines in the engine's input format on stdin (user messages,
control_request, control_response) and writes one JSON line per session frame on stdout:
engine frames exactly as written, gateway events as {"type":"tether","subtype":...}. When
stdin ends, the session is stopped after its turn finishes; exit code is the engine's.
With --client-initialize the first line you send is the engine's initialize control_request
(system prompt, agents, hooks: the engine takes those from its first initialize only), and
the agent sends none of its own; its answer comes back to you.

Options:
${connectionHelp(27)}
${TOKEN_FILE_HELP}
  --agent NAME             agent to run on (env TETHER_AGENT)
  --cwd DIR                working folder on the agent
  --model M                model for the engine
  --permission-mode MODE   initial permission mode
  --json                   pipe mode
  --client-initialize      pipe mode: your first line is the engine's initialize
${TLS_CLIENT_HELP}
  -h, --help               show this help`,
  options: { ...common, agent: { type: 'string' }, cwd: { type: 'string' }, model: { type: 'string' }, 'permission-mode': { type: 'string' }, 'client-initialize': { type: 'boolean' } },
  async run(v) {
    const json = v.json === true;
    const clientInitialize = v['client-initialize'] === true;
    if (clientInitialize && !json) throw new TetherError('INVALID_ARGUMENT', '--client-initialize needs --json (pipe mode)');
    const agent = required(pick(v.agent, 'TETHER_AGENT'), '--agent (or TETHER_AGENT)');
    const client = await connectFrom(v, 'tether-chat', linkReporter(json));
    try {
      const session = await client.createSession({
        agent,
        onProgress: printCreateProgress,
        options: {
          cwd: v.cwd as string | undefined,
          model: v.model as string | undefined,
          permission_mode: v['permission-mode'] as never,
          include_partial_messages: !json,
          ...(clientInitialize ? { client_initialize: true } : {}),
        },
      });
      if (!json) process.stderr.write(`session: ${session.id}\n`);
      return await drive(client, session, json, true);
    } finally {
      await client.close();
    }
  },
};

export const attachCommand: Command = {
  name: 'attach',
  summary: 'join a running session (history first, then live)',
  usage: `Usage: tether attach SESSION [--read-only] [--json] [--from-seq N]

Attaches to a running session: its history from the beginning (or from --from-seq), then the
live stream. Without --read-only you are a controller when your token allows control.
--json is pipe mode (see tether chat --help); stdin EOF does not end watching: the stream
runs until the session ends or you press Ctrl-C.

Options:
${connectionHelp(18)}
${TOKEN_FILE_HELP}
  --read-only     attach as a viewer
  --from-seq N    start the history at sequence number N
  --json          pipe mode
${TLS_CLIENT_HELP}
  -h, --help      show this help`,
  options: { ...common, 'read-only': { type: 'boolean' }, 'from-seq': { type: 'string' } },
  allowPositionals: true,
  async run(v, positionals) {
    const id = positionals[0];
    if (!id || positionals.length > 1) throw new TetherError('INVALID_ARGUMENT', 'give exactly one SESSION id\nRun "tether attach --help" for usage.');
    const fromSeq = v['from-seq'] === undefined ? undefined : Number(v['from-seq']);
    if (fromSeq !== undefined && (!Number.isInteger(fromSeq) || fromSeq < 1)) throw new TetherError('INVALID_ARGUMENT', '--from-seq must be a whole number >= 1');
    const json = v.json === true;
    const client = await connectFrom(v, 'tether-attach', linkReporter(json));
    try {
      const session = await client.attach(id, { fromSeq, readOnly: v['read-only'] === true });
      return await drive(client, session, json, false);
    } finally {
      await client.close();
    }
  },
};
