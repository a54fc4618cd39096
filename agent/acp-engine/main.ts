// Tether's ACP engine: presents an agent that speaks the Agent Client Protocol (OpenCode,
// Gemini CLI, Codex through codex-acp, Claude Code through claude-code-acp) as the engine
// stream the gateway carries (docs/engine-protocol.md, docs/compatibility.md).
//
//   node dist/agent/acp-engine/main.js '["opencode","acp"]' -p --input-format stream-json … [--model M] [--resume ID]
//
// The first argument is the ACP agent's command line as JSON; the rest are the engine flags
// the agent passes every engine (those that mean something here are read, the rest ignored).

import { randomUUID } from 'node:crypto';
import * as acp from '@agentclientprotocol/sdk';
import { isUnknownToken, readEngineArgv } from '../../core/engine-flags.js';
import { POLICY_CALLBACK_ID } from '../../core/policy/hook.js';
import {
  commandLifecycle,
  controlCancel,
  controlError,
  controlRequest,
  controlSuccess,
  isObject,
  system,
  systemInit,
  withdrawQueued,
  type EngineState,
  type Frame,
} from '../demo-engine/frames.js';
import { startAcpChild } from './acp-child.js';
import { answerOption, policyDecision, refusedInitialize, sessionRules, UNSUPPORTED } from './control.js';
import { SessionFolder, type PolicyCheck } from './session-folder.js';
import { StreamWriter } from './stream-writer.js';
import { Terminals } from './terminals.js';

const command = JSON.parse(process.argv[2] ?? '[]') as string[];
const values = new Map<string, string>();
const switches = new Set<string>();
for (const item of readEngineArgv(process.argv.slice(3))) {
  if (isUnknownToken(item)) continue;
  if (item.value !== undefined) values.set(item.flag.name, item.value);
  else switches.add(item.flag.name);
}

function emit(frame: Frame): void {
  process.stdout.write(`${JSON.stringify(frame)}\n`);
}

function fail(message: string): never {
  process.stderr.write(`tether acp engine: ${message}\n`);
  child?.kill();
  process.exit(1);
}

if (!Array.isArray(command) || command.length === 0 || !command.every((w) => typeof w === 'string')) fail('no ACP command given');

const state: EngineState = {
  sessionId: '',
  model: 'default',
  permissionMode: values.get('--permission-mode') ?? 'default',
  cwd: process.cwd(),
  partial: switches.has('--include-partial-messages'),
  sessionStateFrames: false,
  promptTool: true,
  bypassLaunched: false,
  allowedTools: [],
  disallowedTools: [],
};
const writer = new StreamWriter(state, emit);
/** Our control requests to the host (can_use_tool, the policy hook) waiting for an answer, by request_id. */
const pending = new Map<string, (response: Record<string, unknown>) => void>();
let policyHook = false;
let acpSessionId = '';
let caps: acp.InitializeResponse | undefined;
let session: acp.NewSessionResponse | acp.LoadSessionResponse | undefined;
let current: AbortController | undefined;
let loading = false;

function ask(request: Frame, signal?: AbortSignal): Promise<Record<string, unknown> | undefined> {
  const id = randomUUID();
  return new Promise((resolve) => {
    const onAbort = () => {
      pending.delete(id);
      emit(controlCancel(id));
      resolve(undefined);
    };
    pending.set(id, (r) => {
      signal?.removeEventListener('abort', onAbort);
      pending.delete(id);
      resolve(r);
    });
    signal?.addEventListener('abort', onAbort, { once: true });
    emit(controlRequest(id, request));
  });
}

/** The gateway's policy on one call, through the hook the agent merged into initialize (none: no opinion). */
const policy: PolicyCheck = async (tool, input, toolUseId = `acp_${randomUUID()}`) => {
  if (!policyHook) return { decision: 'none' };
  const r = await ask({
    subtype: 'hook_callback',
    callback_id: POLICY_CALLBACK_ID,
    tool_use_id: toolUseId,
    input: {
      hook_event_name: 'PreToolUse',
      session_id: state.sessionId,
      cwd: state.cwd,
      permission_mode: state.permissionMode,
      tool_name: tool,
      tool_input: input,
      tool_use_id: toolUseId,
    },
  });
  return policyDecision(r);
};
const folder = new SessionFolder(state.cwd, policy);
const terminals = new Terminals(folder, process.env);

const child = startAcpChild(command, state.cwd, process.env);
void child.exited.then((why) => {
  terminals.closeAll();
  fail(`the ACP agent ended: ${why}`);
});

const app = acp
  .client({ name: 'tether' })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    if (!loading && params.sessionId === acpSessionId) writer.update(params.update);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => permission(params, signal))
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => folder.read(params))
  .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => folder.write(params))
  .onRequest(acp.methods.client.terminal.create, ({ params }) => terminals.create(params))
  .onRequest(acp.methods.client.terminal.output, ({ params }) => terminals.output(params))
  .onRequest(acp.methods.client.terminal.waitForExit, ({ params }) => terminals.waitForExit(params))
  .onRequest(acp.methods.client.terminal.kill, ({ params }) => terminals.kill(params))
  .onRequest(acp.methods.client.terminal.release, ({ params }) => terminals.release(params));
const agent = app.connect(child.stream).agent;

/**
 * `session/request_permission` as the engine stream asks it: the policy first (deny and allow
 * answer at once), else a can_use_tool prompt, first answer wins at the gateway. "Allow
 * always" is offered as a session rule the gateway keeps, never as the engine's own.
 */
async function permission(p: acp.RequestPermissionRequest, signal: AbortSignal): Promise<acp.RequestPermissionResponse> {
  writer.noteCall(p.toolCall.toolCallId, p.toolCall);
  const call = writer.show(p.toolCall.toolCallId);
  const turn = current?.signal;
  const both = turn ? AbortSignal.any([signal, turn]) : signal;
  const d = await policy(call.name, call.input, p.toolCall.toolCallId);
  if (d.decision === 'deny') return answerOption(p.options, false);
  if (d.decision === 'allow') return answerOption(p.options, true);
  const r = await ask(
    {
      subtype: 'can_use_tool',
      tool_name: call.name,
      input: call.input,
      tool_use_id: p.toolCall.toolCallId,
      permission_suggestions: sessionRules(call),
      ...(d.reason ? { decision_reason: d.reason } : {}),
    },
    both,
  );
  const body = r && r.subtype === 'success' && isObject(r.response) ? r.response : undefined;
  if (!body) return { outcome: { outcome: 'cancelled' } };
  return answerOption(p.options, body.behavior === 'allow');
}

// ---- turns ---------------------------------------------------------------------------

interface Prompt {
  content: acp.ContentBlock[];
  uuid?: string;
}
const queue: Prompt[] = [];
let pumping = false;
let resultIndex = 0;
let stdinClosed = false;

async function pump(): Promise<void> {
  if (pumping) return;
  pumping = true;
  while (queue.length > 0) {
    const p = queue.shift()!;
    const started = Date.now();
    current = new AbortController();
    if (p.uuid) emit(commandLifecycle(state, p.uuid, 'started'));
    emit(systemInit(state));
    let stopReason: acp.StopReason | 'error' = 'end_turn';
    let error: string | undefined;
    try {
      stopReason = (await agent.request('session/prompt', { sessionId: acpSessionId, prompt: p.content })).stopReason;
    } catch (err) {
      stopReason = current.signal.aborted ? 'cancelled' : 'error';
      error = err instanceof Error ? err.message : String(err);
    }
    current = undefined;
    writer.end({
      stopReason,
      error,
      durationMs: Date.now() - started,
      resultIndex: resultIndex++,
      queued: queue.length,
      userMessageUuids: p.uuid ? [p.uuid] : [],
    });
    if (p.uuid) emit(commandLifecycle(state, p.uuid, stopReason === 'end_turn' ? 'completed' : 'cancelled'));
  }
  pumping = false;
  if (stdinClosed) exit();
}

function exit(): void {
  terminals.closeAll();
  child.kill();
  process.stdout.write('', () => process.exit(0));
}

function promptContent(content: unknown): acp.ContentBlock[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return [];
  return content
    .filter((b) => isObject(b) && b.type === 'text' && typeof b.text === 'string')
    .map((b) => ({ type: 'text', text: (b as { text: string }).text }));
}

// ---- control requests ------------------------------------------------------------------

async function onControl(msg: Record<string, unknown>): Promise<void> {
  const id = msg.request_id;
  const req = isObject(msg.request) ? msg.request : {};
  const ok = (payload?: unknown) => emit(controlSuccess(id, payload));
  const no = (why: string, code = 'unsupported_request') => emit(controlError(id, why, code));
  switch (req.subtype) {
    case 'initialize': {
      const refused = refusedInitialize(req);
      if (refused) return no(refused);
      policyHook = isObject(req.hooks);
      return ok({
        commands: [],
        agents: [],
        models: models().map((m) => ({ value: m, displayName: m, description: '' })),
        account: { apiProvider: 'acp' },
        pid: process.pid,
        current_permission_mode: state.permissionMode,
        engine: { protocol: 'acp', agent: caps?.agentInfo ?? null, load_session: caps?.agentCapabilities?.loadSession === true },
        capabilities: [],
        hook_on_failure_supported: true,
        ...(policyHook ? { hooks_applied: true } : {}),
      });
    }
    case 'interrupt': {
      // As the CLI: cancel_queued drops the queue (each prompt cancelled); otherwise it runs on.
      const dropped = req.cancel_queued === true ? queue.splice(0) : [];
      for (const p of dropped) if (p.uuid) emit(commandLifecycle(state, p.uuid, 'cancelled'));
      current?.abort();
      if (current) await agent.notify('session/cancel', { sessionId: acpSessionId });
      return ok(
        req.cancel_queued === true
          ? { still_queued: [], cancelled: dropped.flatMap((p) => (p.uuid ? [p.uuid] : [])) }
          : { still_queued: queue.flatMap((p) => (p.uuid ? [p.uuid] : [])) },
      );
    }
    case 'cancel_async_message': // a queued prompt withdrawn before it reached the ACP agent
      return ok(withdrawQueued(state, queue, req.message_uuid, emit));
    case 'set_permission_mode': {
      const mode = typeof req.mode === 'string' ? req.mode : '';
      const why = await setMode(mode);
      if (why) return no(why, 'invalid_mode');
      state.permissionMode = mode;
      ok({ mode });
      return emit(system(state, 'status', { status: null, permissionMode: mode }));
    }
    case 'set_model': {
      const model = typeof req.model === 'string' ? req.model : '';
      const why = await setModel(model);
      if (why) return no(why, 'invalid_model');
      return ok({ model });
    }
    case 'get_binary_version':
      return ok({ version: caps?.agentInfo?.version ?? 'unknown' });
    default:
      return no(`${String(req.subtype)} ${UNSUPPORTED}`);
  }
}

/** The session's modes: the ACP modes, else its config option of category mode. */
function modes(): string[] {
  const s = session;
  if (s?.modes) return s.modes.availableModes.map((m) => m.id);
  const o = s?.configOptions?.find((c) => c.category === 'mode');
  return o && o.type === 'select' ? selectValues(o) : [];
}

function models(): string[] {
  const s = session as { models?: { availableModels: Array<{ modelId: string }> } } & typeof session;
  if (s?.models) return s.models.availableModels.map((m) => m.modelId);
  const o = s?.configOptions?.find((c) => c.category === 'model');
  return o && o.type === 'select' ? selectValues(o) : [];
}

function selectValues(o: acp.SessionConfigOption & { type: 'select' }): string[] {
  return o.options.flatMap((x) => ('options' in x ? x.options.map((y) => y.value) : [x.value]));
}

/** Sets a mode the engine offers; returns why not otherwise. `default` is where every session starts. */
async function setMode(mode: string): Promise<string | undefined> {
  const offered = modes();
  if (!offered.includes(mode)) {
    if (mode === 'default') return undefined;
    return offered.length === 0
      ? 'this ACP engine offers no permission modes'
      : `mode ${mode} is not one this ACP engine offers (${offered.join(', ')})`;
  }
  if (session?.modes) await agent.request('session/set_mode', { sessionId: acpSessionId, modeId: mode });
  else await setConfigOption('mode', mode);
  return undefined;
}

async function setModel(model: string): Promise<string | undefined> {
  const offered = models();
  if (!offered.includes(model))
    return offered.length === 0
      ? 'this ACP engine offers no model choice'
      : `model ${model} is not one this ACP engine offers (${offered.join(', ')})`;
  const s = session as { models?: unknown } & typeof session;
  if (s?.models) await agent.request('session/set_model', { sessionId: acpSessionId, modelId: model });
  else await setConfigOption('model', model);
  state.model = model;
  return undefined;
}

/** Sets the session's config option of a category (offered: the caller checked). */
async function setConfigOption(category: 'mode' | 'model', value: string): Promise<void> {
  const configId = session!.configOptions!.find((c) => c.category === category)!.id;
  await agent.request('session/set_config_option', { sessionId: acpSessionId, configId, value });
}

// ---- start -----------------------------------------------------------------------------

async function start(): Promise<void> {
  caps = await agent.request('initialize', {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
    clientInfo: { name: 'tether', version: '1' },
  });
  const resume = values.get('--resume');
  const canLoad = caps.agentCapabilities?.loadSession === true;
  if (resume !== undefined) {
    if (!canLoad) fail(`this ACP agent cannot load sessions (no loadSession capability): session ${resume} cannot be resumed`);
    loading = true; // session/load replays the history as updates: the gateway has it already
    acpSessionId = resume;
    session = await agent.request('session/load', { sessionId: resume, cwd: state.cwd, mcpServers: [] });
    loading = false;
  } else {
    const s = await agent.request('session/new', { cwd: state.cwd, mcpServers: [] });
    acpSessionId = s.sessionId;
    session = s;
  }
  state.sessionId = acpSessionId;
  const m = models();
  state.model =
    (session as { models?: { currentModelId?: string } }).models?.currentModelId ??
    session.configOptions?.find((c) => c.category === 'model')?.currentValue?.toString() ??
    m[0] ??
    'default';
  const model = values.get('--model');
  if (model !== undefined) {
    const why = await setModel(model);
    if (why) fail(why);
  }
  const why = await setMode(state.permissionMode);
  if (why) fail(why);
  if (!canLoad && resume === undefined)
    emit(
      system(state, 'notice', {
        level: 'warning',
        message: `${caps.agentInfo?.name ?? command[0]} cannot load sessions (ACP loadSession): this session ends if its agent restarts`,
      }),
    );
}

const ready = start().catch((err) => fail(`could not start an ACP session: ${err instanceof Error ? err.message : String(err)}`));

// ---- input lines -----------------------------------------------------------------------

function onLine(line: string): void {
  if (line.trim() === '') return;
  let msg: unknown;
  try {
    msg = JSON.parse(line);
  } catch {
    fail(`an input line is not JSON (${line.length} chars)`);
  }
  if (!isObject(msg)) return;
  if (msg.type === 'user') {
    const message = isObject(msg.message) ? msg.message : {};
    const uuid = typeof msg.uuid === 'string' ? msg.uuid : undefined;
    if (uuid) emit(commandLifecycle(state, uuid, 'queued'));
    queue.push({ content: promptContent(message.content), uuid });
    void ready.then(pump);
  } else if (msg.type === 'control_request') {
    void ready
      .then(() => onControl(msg as Record<string, unknown>))
      .catch((err) => emit(controlError(msg.request_id, String(err instanceof Error ? err.message : err), 'engine_error')));
  } else if (msg.type === 'control_response') {
    const r = isObject(msg.response) ? msg.response : undefined;
    const answer = r && typeof r.request_id === 'string' ? pending.get(r.request_id) : undefined;
    if (r && answer) answer(r);
  }
}

let partial = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  const lines = (partial + chunk).split('\n');
  partial = lines.pop() ?? '';
  for (const l of lines) onLine(l);
});
process.stdin.on('end', () => {
  if (partial) onLine(partial);
  stdinClosed = true;
  for (const answer of [...pending.values()]) answer({ subtype: 'error', error: 'stdin closed' });
  if (!pumping) void ready.then(exit);
});
process.stdout.on('error', () => process.exit(1));
process.on('SIGTERM', () => {
  terminals.closeAll();
  child.kill();
  process.exit(143);
});
