import { createInterface } from 'node:readline/promises';
import {
  asPermissionRequest,
  askQuestions,
  answerQuestions,
  type PermissionAnswer,
  type PermissionRequest,
} from '../../client/permission-policy.js';
import type { RemoteSession } from '../../client/remote-session.js';
import { TetherError } from '../../core/errors.js';
import { INPUT_REFUSED } from '../../core/protocol/events.js';
import { PermissionMode } from '../../core/protocol/session-options.js';
import { pick, required, type Command } from '../args.js';
import { connectFrom, connectionHelp, CONNECTION_OPTIONS, TLS_CLIENT_HELP } from '../connection-flags.js';
import { printCreateProgress } from '../create-progress.js';
import { TURN_APPROVAL_HELP, TURN_APPROVAL_OPTION, turnApprovalOf } from '../turn-approval-flag.js';
import { worktreeHelp, WORKTREE_OPTION, worktreeOf } from '../worktree-flag.js';
import { ENGINE_HELP, ENGINE_OPTION, engineOf } from '../engine-flag.js';
import { engineNoticeText } from '../../client/turn-view.js';

export const runCommand: Command = {
  name: 'run',
  summary: 'open a session, send one prompt, stream the answer',
  usage: `Usage: tether run --gateway URL --token TOKEN --agent NAME [--engine NAME] [--cwd DIR] [--model M]
                  [--permission-mode MODE] [--turn-approval WHO] [--worktree[=BRANCH]] [--allow TOOL]... [--json] PROMPT

Opens a session on the agent, sends PROMPT, streams the assistant's text to stdout and exits
0 when the turn succeeds, non-zero otherwise. Tool calls and results go to stderr.

Options:
${connectionHelp(27)}
  --agent NAME             agent to run on (env TETHER_AGENT)
  --cwd DIR                working folder on the agent
${ENGINE_HELP}
  --model M                model for the engine
  --permission-mode MODE   default, acceptEdits, plan, dontAsk, bypassPermissions, ...
${TURN_APPROVAL_HELP}
${worktreeHelp(true)}
  --allow TOOL             approve permission prompts for TOOL (repeatable). Other prompts:
                           asked y/n on a terminal, denied otherwise
  --json                   print the engine's messages as NDJSON instead of text
${TLS_CLIENT_HELP}
  -h, --help               show this help`,
  options: {
    ...CONNECTION_OPTIONS,
    agent: { type: 'string' },
    ...ENGINE_OPTION,
    cwd: { type: 'string' },
    model: { type: 'string' },
    'permission-mode': { type: 'string' },
    allow: { type: 'string', multiple: true },
    json: { type: 'boolean' },
    ...TURN_APPROVAL_OPTION,
    ...WORKTREE_OPTION,
  },
  optionalValues: { worktree: 'attached' },
  allowPositionals: true,
  async run(v, positionals) {
    const prompt = positionals.join(' ').trim();
    if (!prompt) throw new TetherError('INVALID_ARGUMENT', 'missing PROMPT\nRun "tether run --help" for usage.');
    const agent = required(pick(v.agent, 'TETHER_AGENT'), '--agent (or TETHER_AGENT)');
    const mode = v['permission-mode'] === undefined ? undefined : PermissionMode.safeParse(v['permission-mode']);
    if (mode && !mode.success)
      throw new TetherError('INVALID_ARGUMENT', `--permission-mode must be one of ${PermissionMode.options.join(', ')}`);
    const turnApproval = turnApprovalOf(v['turn-approval']);
    const worktree = worktreeOf(v.worktree);
    const engine = engineOf(v.engine);
    const json = v.json === true;
    const client = await connectFrom(v, 'tether-run');
    let session: RemoteSession | undefined;
    try {
      session = await client.createSession({
        agent,
        engine,
        onProgress: printCreateProgress,
        options: {
          cwd: v.cwd as string | undefined,
          model: v.model as string | undefined,
          permission_mode: mode?.data,
          include_partial_messages: !json,
          ...(turnApproval ? { turn_approval: turnApproval } : {}),
          ...(worktree ? { worktree } : {}),
        },
      });
      const s = session;
      const allow = new Set((v.allow as string[] | undefined) ?? []);
      let interrupts = 0;
      const onSigint = () => {
        if (++interrupts > 1) process.exit(130);
        process.stderr.write('\n[interrupting; Ctrl-C again to leave]\n');
        s.interrupt().catch(() => {});
      };
      process.on('SIGINT', onSigint);
      await s.sendUserMessage(prompt);
      const code = await streamTurn(s, allow, json);
      process.off('SIGINT', onSigint);
      return code;
    } finally {
      if (session) await session.stop().catch(() => {});
      await client.close();
    }
  },
};

/** Prints one turn and answers its prompts; resolves with the exit code. */
async function streamTurn(session: RemoteSession, allow: Set<string>, json: boolean): Promise<number> {
  let streamed = false;
  for await (const item of session) {
    if (item.kind === 'event') {
      if (item.event.subtype === 'exited') {
        process.stderr.write(
          `engine exited (code ${item.event.code}, signal ${item.event.signal}) before the turn finished\n${item.event.stderr_tail.slice(-2000)}`,
        );
        return 1;
      }
      if (item.event.subtype === 'engine_error') process.stderr.write(`[engine error ${item.event.code}: ${item.event.message}]\n`);
      if (item.event.subtype === 'engine_error' && item.event.code === INPUT_REFUSED) return 1; // the agent refused the prompt: no turn comes
      if (item.event.subtype === 'engine_resumed' && item.event.interrupted_turn) {
        process.stderr.write(`${item.event.message}\n`); // the cut turn's result never comes
        return 1;
      }
      continue;
    }
    if (item.kind !== 'engine' || item.origin !== 'engine') continue;
    const m = item.message;
    if (json) process.stdout.write(item.line + '\n');
    const ask = asPermissionRequest(m);
    if (ask) {
      await session.answer(ask.requestId, await decide(ask, allow));
      continue;
    }
    if (json) {
      if (m.type === 'result') return m.is_error === true ? 1 : 0;
      continue;
    }
    const notice = engineNoticeText(m);
    if (notice) process.stderr.write(`${notice}\n`);
    if (m.type === 'stream_event') {
      const e = m.event as { type?: string; delta?: { type?: string; text?: string } };
      if (e.type === 'content_block_delta' && e.delta?.type === 'text_delta' && e.delta.text) {
        process.stdout.write(e.delta.text);
        streamed = true;
      }
    } else if (m.type === 'assistant') {
      for (const block of (m.message as { content?: Record<string, unknown>[] })?.content ?? []) {
        if (block.type === 'text' && !streamed) process.stdout.write(String(block.text));
        if (block.type === 'text') process.stdout.write('\n');
        if (block.type === 'tool_use') process.stderr.write(`> ${String(block.name)}(${compact(block.input)})\n`);
      }
      streamed = false;
    } else if (m.type === 'user') {
      for (const block of Array.isArray((m.message as { content?: unknown })?.content)
        ? (m.message as { content: Record<string, unknown>[] }).content
        : []) {
        if (block.type === 'tool_result') process.stderr.write(`  ${block.is_error ? 'error' : 'result'}: ${compact(block.content)}\n`);
      }
    } else if (m.type === 'result') {
      if (m.is_error === true) process.stderr.write(`turn failed: ${String(m.result ?? m.subtype)}\n`);
      return m.is_error === true ? 1 : 0;
    }
  }
  process.stderr.write('session ended before the turn finished\n');
  return 1;
}

async function decide(ask: PermissionRequest, allow: Set<string>): Promise<PermissionAnswer> {
  const interactive = process.stdin.isTTY === true;
  if (ask.toolName === 'AskUserQuestion') {
    if (!interactive) return { behavior: 'deny', message: 'tether run: no terminal to ask the question on' };
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    try {
      const answers: Record<string, string> = {};
      for (const q of askQuestions(ask.input)) {
        process.stderr.write(`\n? ${q.question}\n`);
        q.options.forEach((o, i) => process.stderr.write(`  ${i + 1}. ${o.label}${o.description ? ` - ${o.description}` : ''}\n`));
        const reply = (await rl.question('choice (number or your own answer): ')).trim();
        const n = Number(reply);
        answers[q.question] = Number.isInteger(n) && n >= 1 && n <= q.options.length ? q.options[n - 1].label : reply;
      }
      return answerQuestions(ask.input, answers);
    } finally {
      rl.close();
    }
  }
  if (allow.has(ask.toolName)) return { behavior: 'allow', updatedInput: ask.input };
  if (!interactive)
    return { behavior: 'deny', message: `tether run: ${ask.toolName} was not allowed (pass --allow ${ask.toolName} to approve it)` };
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const reply = (await rl.question(`Allow ${ask.toolName}(${compact(ask.input)})? [y/N] `)).trim().toLowerCase();
    return reply === 'y' || reply === 'yes'
      ? { behavior: 'allow', updatedInput: ask.input }
      : { behavior: 'deny', message: 'The user denied this tool call.' };
  } finally {
    rl.close();
  }
}

/** One line, at most 160 characters, for showing tool input or output. */
function compact(value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > 160 ? one.slice(0, 157) + '...' : one;
}
