import { TetherError } from '../../core/errors.js';
import type { Command } from '../args.js';
import { connectFrom, connectionHelp, CONNECTION_OPTIONS, TLS_CLIENT_HELP } from '../connection-flags.js';

/** How long a move may take: the source's engine stops, the target's starts on the transcript. */
const MOVE_TIMEOUT_MS = 120_000;

export const moveCommand: Command = {
  name: 'move',
  summary: 'move a session to another agent between turns (its conversation goes along)',
  usage: `Usage: tether move SESSION --agent OTHER [--cwd DIR]

Moves a session you own (or any, with an admin token) to agent OTHER at a turn boundary: the
engine's transcript goes through the gateway and OTHER resumes it. Same session, same place for
every client. The working folder is OTHER's DIR (default: the same path); a checkout of the same
repository there is yours to make.

Options:
${connectionHelp(18)}
  --agent OTHER   the agent to move the session to
  --cwd DIR       the working folder on OTHER
${TLS_CLIENT_HELP}
  -h, --help      show this help`,
  options: { ...CONNECTION_OPTIONS, agent: { type: 'string' }, cwd: { type: 'string' } },
  allowPositionals: true,
  async run(v, positionals) {
    const id = positionals[0];
    if (!id || positionals.length > 1)
      throw new TetherError('INVALID_ARGUMENT', 'give exactly one SESSION id\nRun "tether move --help" for usage.');
    const agent = typeof v.agent === 'string' ? v.agent : process.env.TETHER_AGENT;
    if (!agent) throw new TetherError('INVALID_ARGUMENT', '--agent OTHER is required\nRun "tether move --help" for usage.');
    const client = await connectFrom(v, 'tether-move');
    try {
      const peer = await client.peer();
      await peer.request(
        'session.move',
        { session_id: id, agent, ...(typeof v.cwd === 'string' ? { cwd: v.cwd } : {}) },
        { timeoutMs: MOVE_TIMEOUT_MS },
      );
      process.stdout.write(`session ${id} now runs on ${agent}\n`);
      return 0;
    } finally {
      await client.close();
    }
  },
};
