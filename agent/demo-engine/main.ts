// Tether demo engine: a stand-in for the Claude Code CLI that needs no Anthropic account.
//
//   node dist/agent/demo-engine/main.js -p --input-format stream-json --output-format stream-json \
//        --verbose --permission-prompt-tool stdio [--include-partial-messages] [--model M] …
//
// It speaks the CLI's stream-json protocol on stdin/stdout (docs/engine-protocol.md): NDJSON
// frames, control requests (initialize, interrupt, set_model, …), can_use_tool permission
// prompts, stream_event partial messages and one `result` per turn. Replies are scripted by
// prompt keywords (see turns.ts). Unknown flags are accepted and ignored.

import { randomUUID } from 'node:crypto';
import {
  DEMO_MODEL,
  DEMO_VERSION,
  Interrupted,
  commandLifecycle,
  contextUsagePayload,
  controlCancel,
  controlError,
  controlRequest,
  controlSuccess,
  demoModels,
  initializePayload,
  isObject,
  parseAnswer,
  result,
  sessionStateChanged,
  system,
  systemInit,
  user,
  withdrawQueued,
  type EngineState,
  type Frame,
  type PermissionAnswer,
} from './frames.js';
import { killTools } from './shell.js';
import { runTurn, type TurnOutcome } from './turns.js';
import { isUnknownToken, readEngineArgv } from '../../core/engine-flags.js';

const PERMISSION_MODES = ['acceptEdits', 'auto', 'bypassPermissions', 'default', 'dontAsk', 'plan'];
const STREAM_CLOSED = 'Tool permission request failed: AbortError: Tool permission stream closed before response received';

// ---- command line ----------------------------------------------------------------------

// Read with the CLI's own arity (core/engine-flags.ts), keyed by each flag's canonical name.
const values = new Map<string, string[]>();
const switches = new Set<string>();
for (const item of readEngineArgv(process.argv.slice(2))) {
  if (isUnknownToken(item)) {
    if (item.token.startsWith('-')) switches.add(item.token.split('=')[0]!); // unknown flags are ignored
  } else if (item.value !== undefined) values.set(item.flag.name, [...(values.get(item.flag.name) ?? []), item.value]);
  else switches.add(item.flag.name);
}
const flag = (...names: string[]): string | undefined => names.map((n) => values.get(n)?.at(-1)).find((v) => v !== undefined);

/** Tool rules from --allowedTools/--disallowedTools: split on commas and spaces outside parentheses. */
function rules(...names: string[]): string[] {
  const out: string[] = [];
  for (const value of names.flatMap((n) => values.get(n) ?? [])) {
    let depth = 0;
    let cur = '';
    for (const ch of value) {
      if (ch === '(') depth++;
      if (ch === ')') depth = Math.max(0, depth - 1);
      if (depth === 0 && (ch === ',' || /\s/.test(ch))) {
        if (cur) out.push(cur);
        cur = '';
      } else cur += ch;
    }
    if (cur) out.push(cur);
  }
  return out;
}

if (switches.has('--print') && flag('--output-format') === 'stream-json' && !switches.has('--verbose')) {
  process.stderr.write('Error: When using --print, --output-format=stream-json requires --verbose\n');
  process.exit(1);
}

const launchMode = switches.has('--dangerously-skip-permissions') ? 'bypassPermissions' : flag('--permission-mode');
const state: EngineState = {
  sessionId: flag('--resume', '--session-id') ?? randomUUID(),
  model: flag('--model') && flag('--model') !== 'default' ? flag('--model')! : DEMO_MODEL,
  permissionMode: launchMode && PERMISSION_MODES.includes(launchMode) ? launchMode : 'default',
  cwd: process.cwd(),
  partial: switches.has('--include-partial-messages'),
  sessionStateFrames: ['1', 'true'].includes(process.env.CLAUDE_CODE_SDK_READS_SESSION_STATE ?? ''),
  promptTool: flag('--permission-prompt-tool') === 'stdio',
  bypassLaunched: launchMode === 'bypassPermissions' || switches.has('--allow-dangerously-skip-permissions'),
  allowedTools: rules('--allowedTools'),
  disallowedTools: rules('--disallowedTools'),
};

// ---- output and engine state -----------------------------------------------------------

function emit(frame: Frame): void {
  process.stdout.write(`${JSON.stringify(frame)}\n`);
}

function exit(code: number): void {
  process.stdout.write('', () => process.exit(code));
}

interface Prompt {
  text: string;
  uuid?: string;
}
const queue: Prompt[] = [];
/** can_use_tool requests waiting for the host, by request_id. */
const pending = new Map<string, (answer: PermissionAnswer) => void>();
let current: AbortController | null = null;
let pumping = false,
  stdinClosed = false,
  lastIsError = false;
let exitAfterTurn: number | null = null;
let resultIndex = 0,
  tokensUsed = 0;
let sessionStateNow = 'idle';

function setSessionState(next: 'running' | 'requires_action' | 'idle'): void {
  if (next === sessionStateNow) return;
  sessionStateNow = next;
  if (state.sessionStateFrames) emit(sessionStateChanged(state, next));
}

function askPermission(signal: AbortSignal, request: Frame): Promise<PermissionAnswer> {
  return new Promise((resolve, reject) => {
    if (stdinClosed) return resolve({ behavior: 'deny', message: STREAM_CLOSED, failed: true });
    const id = randomUUID();
    const onAbort = (): void => {
      pending.delete(id);
      reject(new Interrupted('aborted_tools'));
    };
    pending.set(id, (answer) => {
      pending.delete(id);
      signal.removeEventListener('abort', onAbort);
      resolve(answer);
    });
    signal.addEventListener('abort', onAbort, { once: true });
    emit(controlRequest(id, request));
  });
}

/** Withdraws pending can_use_tool prompts (control_cancel_request), before an interrupt aborts the turn. */
function cancelPending(): void {
  for (const id of pending.keys()) emit(controlCancel(id));
}

async function runOne(p: Prompt): Promise<void> {
  const ctrl = new AbortController();
  current = ctrl;
  const started = Date.now();
  setSessionState('running');
  if (p.uuid) emit(commandLifecycle(state, p.uuid, 'started'));
  emit(systemInit(state));
  let outcome: TurnOutcome;
  try {
    outcome = await runTurn(
      {
        state,
        signal: ctrl.signal,
        emit,
        sessionState: setSessionState,
        askPermission: (request) => askPermission(ctrl.signal, request),
      },
      p.text,
    );
  } catch (err) {
    process.stderr.write(`demo-engine: turn failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    outcome = {
      isError: true,
      subtype: 'error_during_execution',
      terminalReason: 'error',
      stopReason: null,
      numTurns: 0,
      denials: [],
      inputTokens: 0,
      outputTokens: 0,
    };
  }
  current = null;
  tokensUsed += outcome.inputTokens + outcome.outputTokens;
  lastIsError = outcome.isError;
  emit(
    result(state, {
      ...outcome,
      durationMs: Date.now() - started,
      resultIndex: resultIndex++,
      queued: queue.length,
      userMessageUuids: p.uuid ? [p.uuid] : [],
    }),
  );
  if (p.uuid) emit(commandLifecycle(state, p.uuid, 'completed'));
  if (queue.length === 0) setSessionState('idle');
}

async function pump(): Promise<void> {
  if (pumping) return;
  pumping = true;
  while (queue.length > 0 && exitAfterTurn === null) await runOne(queue.shift()!);
  pumping = false;
  maybeExit();
}

function maybeExit(): void {
  if (pumping) return;
  if (exitAfterTurn !== null) exit(exitAfterTurn);
  else if (stdinClosed && queue.length === 0) exit(lastIsError ? 1 : 0);
}

// ---- input frames ----------------------------------------------------------------------

function promptText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((b) => isObject(b) && b.type === 'text' && typeof b.text === 'string')
    .map((b) => (b as { text: string }).text)
    .join('\n');
}

function onControlRequest(msg: Record<string, unknown>): void {
  const id = msg.request_id;
  const req = isObject(msg.request) ? msg.request : {};
  const ok = (payload?: unknown): void => emit(controlSuccess(id, payload));
  switch (req.subtype) {
    case 'initialize':
      return emit(
        controlSuccess(id, initializePayload(state, isObject(req.hooks), current !== null), {
          pending_permission_requests: [],
          pending_user_dialog_requests: [],
        }),
      );
    case 'interrupt': {
      cancelPending();
      // As the CLI: cancel_queued drops the queue (each prompt cancelled); otherwise it runs on.
      const dropped = req.cancel_queued === true ? queue.splice(0) : [];
      for (const p of dropped) if (p.uuid) emit(commandLifecycle(state, p.uuid, 'cancelled'));
      ok(
        req.cancel_queued === true
          ? { still_queued: [], cancelled: dropped.flatMap((p) => (p.uuid ? [p.uuid] : [])) }
          : { still_queued: queue.flatMap((p) => (p.uuid ? [p.uuid] : [])) },
      );
      current?.abort();
      return;
    }
    case 'cancel_async_message':
      return ok(withdrawQueued(state, queue, req.message_uuid, emit));
    case 'set_model': {
      const model = typeof req.model === 'string' && req.model !== 'default' ? req.model : DEMO_MODEL;
      state.model = model;
      emit(user(state, `<local-command-stdout>Set model to \`${model}\`</local-command-stdout>`));
      return ok({ model });
    }
    case 'set_permission_mode': {
      const mode = typeof req.mode === 'string' ? req.mode : '';
      if (!PERMISSION_MODES.includes(mode)) {
        return emit(controlError(id, `Cannot set permission mode: must be one of ${PERMISSION_MODES.join(', ')}`, 'invalid_mode'));
      }
      if (mode === 'bypassPermissions' && !state.bypassLaunched) {
        return emit(
          controlError(
            id,
            'Cannot set permission mode to bypassPermissions because the session was not launched with --dangerously-skip-permissions',
            'bypass_not_launched',
          ),
        );
      }
      state.permissionMode = mode;
      ok({ mode });
      return emit(system(state, 'status', { status: null, permissionMode: mode }));
    }
    case 'get_context_usage':
      return ok(contextUsagePayload(state, tokensUsed));
    case 'mcp_status':
      return ok({ mcpServers: [] });
    case 'get_binary_version':
      return ok({ version: DEMO_VERSION });
    case 'get_session_cost':
      return ok({ text: `Estimated cost: $0.0000 (demo engine, ${resultIndex} turns, no API calls)` });
    case 'list_models':
      return ok({ models: demoModels() });
    case 'get_settings':
      return ok({ effective: {}, sources: [], applied: { model: state.model, effort: null } });
    case 'set_max_thinking_tokens':
    case 'apply_flag_settings':
      return ok();
    case 'rename_session':
      if (typeof req.title === 'string') emit(system(state, 'session_title_changed', { title: req.title }));
      return ok();
    default:
      return emit(controlError(id, `Unsupported control request subtype: ${String(req.subtype)}`, 'unsupported_request'));
  }
}

function onLine(raw: string): void {
  const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
  if (line.trim() === '') return;
  let msg: unknown;
  try {
    msg = JSON.parse(line);
  } catch (err) {
    const kind = err instanceof Error ? err.name : 'SyntaxError';
    process.stderr.write(`Error parsing streaming input line (type=unknown, ${line.length} chars): ${kind}\n`);
    process.exit(1);
  }
  if (!isObject(msg)) return;
  if (msg.type === 'user') {
    if (exitAfterTurn !== null) return;
    const message = isObject(msg.message) ? msg.message : {};
    const uuid = typeof msg.uuid === 'string' ? msg.uuid : undefined;
    if (uuid) emit(commandLifecycle(state, uuid, 'queued'));
    queue.push({ text: promptText(message.content), uuid });
    void pump();
  } else if (msg.type === 'control_request') {
    onControlRequest(msg);
  } else if (msg.type === 'control_response') {
    const r = isObject(msg.response) ? msg.response : undefined;
    const answer = r && typeof r.request_id === 'string' ? pending.get(r.request_id) : undefined;
    if (r && answer) answer(parseAnswer(r));
  }
  // keep_alive, control_cancel_request and unknown types are ignored, like the CLI.
}

// ---- main --------------------------------------------------------------------------------

let partialLine: string[] = [];
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  let start = 0;
  for (let nl = chunk.indexOf('\n'); nl !== -1; nl = chunk.indexOf('\n', start)) {
    partialLine.push(chunk.slice(start, nl));
    const line = partialLine.join('');
    partialLine = [];
    start = nl + 1;
    onLine(line);
  }
  if (start < chunk.length) partialLine.push(chunk.slice(start));
});
process.stdin.on('end', () => {
  if (partialLine.length > 0) onLine(partialLine.join(''));
  partialLine = [];
  stdinClosed = true;
  for (const answer of [...pending.values()]) answer({ behavior: 'deny', message: STREAM_CLOSED, failed: true });
  maybeExit();
});
process.stdout.on('error', () => process.exit(1));
process.on('SIGTERM', () => {
  killTools();
  process.exit(143);
});
process.on('SIGINT', () => {
  if (current === null) return exit(0);
  exitAfterTurn = 0;
  queue.length = 0;
  cancelPending();
  current.abort();
});
