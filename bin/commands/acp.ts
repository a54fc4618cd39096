import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { tetherAcpAgent } from '../../client/acp/acp-agent.js';
import { pick, required, type Command } from '../args.js';
import { connectFrom, connectionHelp, gatewaysFrom, CONNECTION_OPTIONS, TLS_CLIENT_HELP } from '../connection-flags.js';

export const acpCommand: Command = {
  name: 'acp',
  summary: 'serve the Agent Client Protocol on stdin/stdout (for editors: Zed, JetBrains, …)',
  usage: `Usage: tether acp --agent NAME [--cwd DIR] [--gateway URL --token TOKEN]

An ACP agent on stdin/stdout for editors that run agents as a process. Each ACP session is
an ordinary Tether session on agent NAME (teammates can attach to it by its id), prompts run
on the build machine, permission prompts come to the editor. Logs go nowhere: stdout is
the protocol. Methods covered: docs/acp.md.

Options:
  --agent NAME      agent to run sessions on (env TETHER_AGENT)
  --cwd DIR         working folder on the agent for every session (default: the agent's own
                    default folder; the editor's folder is a local path and is not sent)
${connectionHelp(20)}
${TLS_CLIENT_HELP}
  -h, --help        show this help`,
  options: { ...CONNECTION_OPTIONS, agent: { type: 'string' }, cwd: { type: 'string' } },
  async run(v) {
    const agent = required(pick(v.agent, 'TETHER_AGENT'), '--agent (or TETHER_AGENT)');
    gatewaysFrom(v); // missing: said now, before the editor's first request
    const app = tetherAcpAgent({ agent, cwd: v.cwd as string | undefined, client: () => connectFrom(v, 'tether-acp') });
    const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>);
    // The editor closing our stdin ends the connection; the sessions keep running on the agent.
    await app.connect(stream).closed;
    return 0;
  },
};
