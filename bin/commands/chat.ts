import { TetherError } from '../../core/errors.js';
import { pick, required, type Command } from '../args.js';
import { connectFrom, connectionHelp, TLS_CLIENT_HELP, TOKEN_FILE_HELP } from '../connection-flags.js';
import { printCreateProgress } from '../create-progress.js';
import { drive, linkReporter, SESSION_DRIVE_OPTIONS } from '../session-drive.js';
import { TURN_APPROVAL_HELP, TURN_APPROVAL_OPTION, turnApprovalOf } from '../turn-approval-flag.js';
import { worktreeHelp, WORKTREE_OPTION, worktreeOf } from '../worktree-flag.js';
import { ENGINE_HELP, ENGINE_OPTION, engineOf } from '../engine-flag.js';

export const chatCommand: Command = {
  name: 'chat',
  summary: 'start a session on an agent and talk to it (interactive, or --json for scripts)',
  usage: `Usage: tether chat --agent NAME [--token-file FILE] [--cwd DIR] [--model M] [--permission-mode MODE] [--turn-approval WHO] [--engine NAME] [--worktree [BRANCH]] [--json [--client-initialize]]

Starts a new session on the agent and attaches to it as its owner.
Interactive: type prompts; permission prompts ask y / n / a (always for this session);
AskUserQuestion takes a number or your own answer; Ctrl-C interrupts the turn, a second
Ctrl-C leaves (the session keeps running; tether attach brings you back). /model M, /mode M,
/rules, /unallow N, /owner NAME (hand the session to NAME; you stay on as a controller) and
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
${ENGINE_HELP}
  --model M                model for the engine
  --permission-mode MODE   initial permission mode
${TURN_APPROVAL_HELP}
${worktreeHelp(false)}
  --json                   pipe mode
  --client-initialize      pipe mode: your first line is the engine's initialize
${TLS_CLIENT_HELP}
  -h, --help               show this help`,
  options: {
    ...SESSION_DRIVE_OPTIONS,
    agent: { type: 'string' },
    ...ENGINE_OPTION,
    cwd: { type: 'string' },
    model: { type: 'string' },
    'permission-mode': { type: 'string' },
    'client-initialize': { type: 'boolean' },
    ...TURN_APPROVAL_OPTION,
    ...WORKTREE_OPTION,
  },
  optionalValues: { worktree: 'next' },
  async run(v) {
    const json = v.json === true;
    const clientInitialize = v['client-initialize'] === true;
    if (clientInitialize && !json) throw new TetherError('INVALID_ARGUMENT', '--client-initialize needs --json (pipe mode)');
    const agent = required(pick(v.agent, 'TETHER_AGENT'), '--agent (or TETHER_AGENT)');
    const turnApproval = turnApprovalOf(v['turn-approval']);
    const worktree = worktreeOf(v.worktree);
    const engine = engineOf(v.engine);
    const client = await connectFrom(v, 'tether-chat', linkReporter(json));
    try {
      const session = await client.createSession({
        agent,
        engine,
        onProgress: printCreateProgress,
        options: {
          cwd: v.cwd as string | undefined,
          model: v.model as string | undefined,
          permission_mode: v['permission-mode'] as never,
          include_partial_messages: !json,
          ...(clientInitialize ? { client_initialize: true } : {}),
          ...(turnApproval ? { turn_approval: turnApproval } : {}),
          ...(worktree ? { worktree } : {}),
        },
      });
      if (!json) process.stderr.write(`session: ${session.id}\n`);
      return await drive(client, session, json, true);
    } finally {
      await client.close();
    }
  },
};
