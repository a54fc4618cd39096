// Scripted turns for the demo engine (agent/demo-engine/main.ts).
//
// The "model" is a keyword script on the prompt text (matched at word starts, case-insensitive):
//   file / bash / run       -> Bash tool call (can_use_tool), runs it with /bin/sh when allowed
//   ask / question / choose -> AskUserQuestion (can_use_tool, requires_user_interaction)
//   slow / long             -> ~40 text deltas 50 ms apart (to try interrupts)
//   anything else           -> "Hello from the Tether demo engine. You said: …"

import { join } from 'node:path';
import {
  Interrupted,
  assistant,
  isObject,
  newMessageId,
  newToolUseId,
  ruleAllows,
  streamEvent,
  system,
  toolResult,
  user,
  type EngineState,
  type Frame,
  type PermissionAnswer,
  type ResultInfo,
} from './frames.js';
import { BASH_TIMEOUT_MS, runShell } from './shell.js';

/** What the engine lends a running turn. */
export interface TurnHost {
  state: EngineState;
  signal: AbortSignal;
  emit(frame: Frame): void;
  /** Reports a session state change (written only with CLAUDE_CODE_SDK_READS_SESSION_STATE=1). */
  sessionState(state: 'running' | 'requires_action'): void;
  /** Writes can_use_tool and waits for the answer; rejects with Interrupted when the turn is interrupted. */
  askPermission(request: Frame): Promise<PermissionAnswer>;
}

export type TurnOutcome = Pick<
  ResultInfo,
  'isError' | 'subtype' | 'terminalReason' | 'stopReason' | 'text' | 'numTurns' | 'denials' | 'inputTokens' | 'outputTokens'
>;

const REJECTED =
  "The user doesn't want to proceed with this tool use. The tool use was rejected. STOP what you are doing and wait for the user to tell you how to proceed.";
const STOPPED = 'The user interrupted this tool call while it was running. It may have run in part or in full.';
const DEMO_COMMAND = "echo 'hello from tether' > tether-demo.txt";
const QUESTION = {
  question: 'Which color do you prefer?',
  header: 'Color',
  multiSelect: false,
  options: [
    { label: 'Red', description: 'Warm and bold' },
    { label: 'Blue', description: 'Calm and cool' },
  ],
};

type Block = { type: 'text'; chunks: string[] } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

const tokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4));

/** A text block streamed in about five chunks. */
function say(text: string): Block {
  const size = Math.max(1, Math.ceil(text.length / 5));
  const chunks: string[] = [];
  for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size));
  return { type: 'text', chunks: chunks.length > 0 ? chunks : [''] };
}

class Turn {
  apiCalls = 0;
  denials: Frame[] = [];
  lastText = '';
  outputTokens = 0;

  constructor(
    readonly h: TurnHost,
    readonly prompt: string,
  ) {}

  get s(): EngineState {
    return this.h.state;
  }

  emit(frame: Frame): void {
    this.h.emit(frame);
  }

  sleep(ms: number): Promise<void> {
    const signal = this.h.signal;
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new Interrupted('aborted_streaming'));
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(new Interrupted('aborted_streaming'));
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** One simulated API message: stream_events (partial mode) and one `assistant` frame per block. */
  async message(blocks: Block[], stop: 'end_turn' | 'tool_use', delay = 30): Promise<void> {
    this.apiCalls++;
    const id = newMessageId();
    const se = (event: Frame, extra?: Frame): void => {
      if (this.s.partial) this.emit(streamEvent(this.s, id, event, extra));
    };
    if (this.s.partial) this.emit(system(this.s, 'status', { status: 'requesting' }));
    let index = 0,
      text = '';
    let open = false,
      started = false;
    try {
      await this.sleep(delay);
      se({
        type: 'message_start',
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model: this.s.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: tokens(this.prompt), output_tokens: 1 },
        },
      });
      started = true;
      for (; index < blocks.length; index++) {
        const b = blocks[index]!;
        open = true;
        if (b.type === 'text') {
          se({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
          for (const chunk of b.chunks) {
            await this.sleep(delay);
            text += chunk;
            se({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: chunk } });
          }
          this.emit(assistant(this.s, id, { type: 'text', text }));
          this.lastText = text;
          this.outputTokens += tokens(text);
          text = '';
        } else {
          se({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
          se({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } });
          this.emit(assistant(this.s, id, { type: 'tool_use', id: b.id, name: b.name, input: b.input }));
        }
        se({ type: 'content_block_stop', index });
        open = false;
      }
      se({ type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: this.outputTokens } });
      se({ type: 'message_stop' });
    } catch (e) {
      if (!(e instanceof Interrupted)) throw e;
      if (text) this.emit(assistant(this.s, id, { type: 'text', text }, true));
      this.emit(user(this.s, [{ type: 'text', text: '[Request interrupted by user]' }]));
      if (started) {
        if (open) se({ type: 'content_block_stop', index });
        se({ type: 'message_delta', delta: { stop_reason: null, stop_sequence: null }, usage: { output_tokens: 1 } });
        se({ type: 'message_stop' }, { abandoned_blocks: { api_message_id: id, from_block_index: open ? index + 1 : index } });
      }
      throw new Interrupted('aborted_streaming');
    }
  }

  /** Permission for one tool call: auto-allow by rule/mode, or ask the host with can_use_tool. */
  async permission(tool: string, input: Record<string, unknown>, toolUseId: string, extra: Frame): Promise<PermissionAnswer> {
    if (!this.s.promptTool || this.s.permissionMode === 'dontAsk') {
      const message = `Claude requested permissions to use ${tool}, but you haven't granted it yet.`;
      this.emit(system(this.s, 'permission_denied', { tool_name: tool, tool_use_id: toolUseId, message }));
      return { behavior: 'deny', message };
    }
    const command = typeof input.command === 'string' ? input.command : '';
    if (tool === 'Bash' && (this.s.permissionMode === 'bypassPermissions' || ruleAllows(this.s.allowedTools, tool, command))) {
      return { behavior: 'allow' };
    }
    this.h.sessionState('requires_action');
    try {
      const answer = await this.h.askPermission({
        subtype: 'can_use_tool',
        tool_name: tool,
        display_name: tool,
        input,
        tool_use_id: toolUseId,
        ...extra,
      });
      this.h.sessionState('running');
      if (answer.behavior === 'allow') this.s.allowedTools.push(...(answer.sessionRules ?? [])); // "for this session": later calls match like --allowedTools
      return answer;
    } catch (e) {
      if (!(e instanceof Interrupted)) throw e;
      return this.denied(tool, input, toolUseId, { behavior: 'deny', message: REJECTED, interrupt: true });
    }
  }

  /** Records a denial and writes its tool_result; a deny with interrupt:true ends the turn. */
  denied(
    tool: string,
    input: Record<string, unknown>,
    toolUseId: string,
    answer: PermissionAnswer & { behavior: 'deny' },
  ): PermissionAnswer {
    this.denials.push({ tool_name: tool, tool_use_id: toolUseId, tool_input: input });
    if (answer.interrupt) {
      this.emit(toolResult(this.s, toolUseId, REJECTED, true, 'User rejected tool use', { non_execution_kind: 'user-rejected' }));
      this.emit(user(this.s, [{ type: 'text', text: '[Request interrupted by user for tool use]' }]));
      throw new Interrupted('aborted_tools');
    }
    this.emit(
      toolResult(this.s, toolUseId, answer.message, true, `Error: ${answer.message}`, {
        non_execution_kind: 'permission-rule',
        permission_decision: { decision: 'reject', source: answer.failed ? 'config' : 'user_reject' },
      }),
    );
    return answer;
  }

  /** Runs a shell command in cwd (10 s timeout) and writes its tool_result. Returns the exit code. */
  async runBash(command: string, toolUseId: string): Promise<number> {
    const run = await runShell(command, this.s.cwd, this.h.signal);
    if (this.h.signal.aborted) {
      this.emit(toolResult(this.s, toolUseId, STOPPED, true, 'Error: interrupted', { non_execution_kind: 'interrupted' }));
      this.emit(user(this.s, [{ type: 'text', text: '[Request interrupted by user for tool use]' }]));
      throw new Interrupted('aborted_tools');
    }
    const { stdout, stderr, code, timedOut } = run;
    const output = run.spawnError ?? [stdout.trimEnd(), stderr.trimEnd()].filter(Boolean).join('\n').slice(0, 30_000);
    let content = output || '(Bash completed with no output)';
    if (timedOut) content = `Command timed out after ${BASH_TIMEOUT_MS / 1000}s\n${output}`.trimEnd();
    else if (code !== 0) content = `Exit code ${code}\n${output}`.trimEnd();
    const ok = code === 0 && !timedOut;
    this.emit(
      toolResult(
        this.s,
        toolUseId,
        content,
        !ok,
        { stdout, stderr, interrupted: false, isImage: false, noOutputExpected: false },
        { permission_decision: { decision: 'accept', source: 'user_temporary' } },
      ),
    );
    return ok ? 0 : code || 1;
  }

  outcome(interrupted?: Interrupted): TurnOutcome {
    const base = { numTurns: this.apiCalls, denials: this.denials, inputTokens: tokens(this.prompt), outputTokens: this.outputTokens };
    if (interrupted) {
      return {
        ...base,
        isError: true,
        subtype: 'error_during_execution',
        terminalReason: interrupted.terminalReason,
        stopReason: interrupted.terminalReason === 'aborted_tools' ? 'tool_use' : null,
      };
    }
    return { ...base, isError: false, subtype: 'success', terminalReason: 'completed', stopReason: 'end_turn', text: this.lastText };
  }
}

async function fileScript(t: Turn): Promise<void> {
  if (t.s.disallowedTools.includes('Bash')) {
    return t.message([say('The Bash tool is disabled in this session (--disallowedTools), so I cannot run anything.')], 'end_turn');
  }
  const id = newToolUseId();
  const input = { command: DEMO_COMMAND, description: 'Write a demo file' };
  await t.message(
    [say("I'll write a small demo file in the working directory."), { type: 'tool_use', id, name: 'Bash', input }],
    'tool_use',
  );
  const answer = await t.permission('Bash', input, id, {
    description: input.description,
    permission_suggestions: [
      // The command itself, as the real CLI proposes for a command that writes through a redirect (a wildcard rule would not cover the redirect).
      { type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: DEMO_COMMAND }], behavior: 'allow', destination: 'localSettings' },
      { type: 'addDirectories', directories: [t.s.cwd], destination: 'session' },
    ],
    blocked_path: join(t.s.cwd, 'tether-demo.txt'),
  });
  if (answer.behavior === 'deny') {
    t.denied('Bash', input, id, answer);
    return t.message([say('Understood, I did not run it.')], 'end_turn');
  }
  const updated = answer.updatedInput?.command;
  const code = await t.runBash(typeof updated === 'string' ? updated : input.command, id);
  await t.message([say(code === 0 ? 'Done: the command ran.' : `The command ran but failed (exit code ${code}).`)], 'end_turn');
}

async function askScript(t: Turn): Promise<void> {
  if (!t.s.promptTool || t.s.disallowedTools.includes('AskUserQuestion')) {
    return t.message([say('I would ask you a question, but AskUserQuestion needs --permission-prompt-tool stdio.')], 'end_turn');
  }
  const id = newToolUseId();
  const input = { questions: [QUESTION] };
  await t.message([say('I have a quick question for you.'), { type: 'tool_use', id, name: 'AskUserQuestion', input }], 'tool_use');
  const answer = await t.permission('AskUserQuestion', input, id, { requires_user_interaction: true });
  if (answer.behavior === 'deny') {
    t.denied('AskUserQuestion', input, id, answer);
    return t.message([say('Okay, no answer then.')], 'end_turn');
  }
  const answers = answer.updatedInput?.answers;
  const choice = isObject(answers) ? answers[QUESTION.question] : undefined;
  const meta = { permission_decision: { decision: 'accept', source: 'user_temporary' } };
  if (typeof choice === 'string' && choice !== '') {
    t.emit(
      toolResult(
        t.s,
        id,
        `Your questions have been answered: "${QUESTION.question}"="${choice}". You can now continue with these answers in mind.`,
        undefined,
        { questions: input.questions, answers },
        meta,
      ),
    );
    return t.message([say(`You chose: ${choice}.`)], 'end_turn');
  }
  t.emit(toolResult(t.s, id, 'The user did not answer the questions.', undefined, { questions: input.questions, answers: {} }, meta));
  await t.message([say('You did not answer.')], 'end_turn');
}

const SLOW_CHUNKS = ['Counting slowly:', ...Array.from({ length: 39 }, (_, i) => ` ${i + 1}${i === 38 ? '.' : ','}`)];

/** Runs one turn to its end (or interruption) and returns what the `result` frame needs. */
export async function runTurn(h: TurnHost, prompt: string): Promise<TurnOutcome> {
  const t = new Turn(h, prompt);
  try {
    if (/\b(file|bash|run)/i.test(prompt)) await fileScript(t);
    else if (/\b(ask|question|choose)/i.test(prompt)) await askScript(t);
    else if (/\b(slow|long)/i.test(prompt)) await t.message([{ type: 'text', chunks: SLOW_CHUNKS }], 'end_turn', 50);
    else {
      const said = prompt.length > 200 ? `${prompt.slice(0, 200)}…` : prompt || '(nothing)';
      await t.message([say(`Hello from the Tether demo engine. You said: ${said}`)], 'end_turn');
    }
    return t.outcome();
  } catch (e) {
    if (e instanceof Interrupted) return t.outcome(e);
    throw e;
  }
}
