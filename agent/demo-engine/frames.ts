// Frame builders and small protocol helpers for the demo engine (agent/demo-engine/main.ts).
//
// Shapes follow the real Claude Code CLI's stream-json output (see
// docs/engine-protocol.md and the engine fixtures), with fewer fields.

import { randomBytes, randomUUID } from 'node:crypto';

export type Frame = Record<string, unknown>;

/** Engine-wide settings and state the frames need. */
export interface EngineState {
  sessionId: string;
  model: string;
  permissionMode: string;
  cwd: string;
  /** --include-partial-messages */
  partial: boolean;
  /** CLAUDE_CODE_SDK_READS_SESSION_STATE=1 */
  sessionStateFrames: boolean;
  /** --permission-prompt-tool stdio */
  promptTool: boolean;
  /** launched with bypassPermissions available */
  bypassLaunched: boolean;
  allowedTools: string[];
  disallowedTools: string[];
}

export const DEMO_MODEL = 'demo-model';
export const DEMO_VERSION = 'demo';

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function newMessageId(): string {
  return `msg_demo_${randomBytes(12).toString('hex')}`;
}

export function newToolUseId(): string {
  return `toolu_demo_${randomBytes(12).toString('hex')}`;
}

function stamp(s: EngineState): Frame {
  return { session_id: s.sessionId, uuid: randomUUID() };
}

/** Tools the demo actually implements (the real CLI lists ~25). */
export function toolList(s: EngineState): string[] {
  const tools = s.promptTool ? ['AskUserQuestion', 'Bash'] : ['Bash'];
  return tools.filter((t) => !s.disallowedTools.includes(t));
}

export function systemInit(s: EngineState): Frame {
  return {
    type: 'system',
    subtype: 'init',
    cwd: s.cwd,
    session_id: s.sessionId,
    tools: toolList(s),
    mcp_servers: [],
    model: s.model,
    permissionMode: s.permissionMode,
    slash_commands: [],
    apiKeySource: 'none',
    claude_code_version: DEMO_VERSION,
    output_style: 'default',
    agents: [],
    skills: [],
    plugins: [],
    capabilities: [],
    uuid: randomUUID(),
  };
}

export function system(s: EngineState, subtype: string, fields: Frame): Frame {
  return { type: 'system', subtype, ...fields, ...stamp(s) };
}

export function sessionStateChanged(s: EngineState, state: 'running' | 'requires_action' | 'idle'): Frame {
  return system(s, 'session_state_changed', { state, sdk_host_only: true });
}

export function commandLifecycle(s: EngineState, commandUuid: string, state: string): Frame {
  return { type: 'command_lifecycle', command_uuid: commandUuid, state, ...stamp(s) };
}

export function assistant(s: EngineState, messageId: string, block: Frame, aborted = false): Frame {
  const frame: Frame = {
    type: 'assistant',
    message: {
      id: messageId,
      type: 'message',
      role: 'assistant',
      model: s.model,
      content: [block],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    },
    parent_tool_use_id: null,
    ...stamp(s),
    timestamp: new Date().toISOString(),
    request_id: messageId.replace('msg_', 'req_'),
  };
  if (aborted) frame.aborted = true;
  return frame;
}

/** A `user` frame written by the engine (tool results, interrupt markers, local output). */
export function user(s: EngineState, content: unknown, extra: Frame = {}): Frame {
  return {
    type: 'user',
    message: { role: 'user', content },
    parent_tool_use_id: null,
    ...stamp(s),
    timestamp: new Date().toISOString(),
    ...extra,
  };
}

export function toolResult(
  s: EngineState,
  toolUseId: string,
  content: string,
  isError: boolean | undefined,
  toolUseResult: unknown,
  meta: Frame,
): Frame {
  const block: Frame = { type: 'tool_result', content, tool_use_id: toolUseId };
  if (isError !== undefined) block.is_error = isError;
  return user(s, [block], { tool_use_result: toolUseResult, tool_result_meta: [{ id: toolUseId, ...meta }] });
}

export function streamEvent(s: EngineState, messageId: string, event: Frame, extra: Frame = {}): Frame {
  return {
    type: 'stream_event',
    event,
    session_id: s.sessionId,
    parent_tool_use_id: null,
    uuid: randomUUID(),
    api_message_id: messageId,
    ...extra,
  };
}

export function controlSuccess(requestId: unknown, payload?: unknown, extra: Frame = {}): Frame {
  const response: Frame = { subtype: 'success' };
  if (typeof requestId === 'string') response.request_id = requestId;
  if (payload !== undefined) response.response = payload;
  return { type: 'control_response', response: { ...response, ...extra } };
}

export function controlError(requestId: unknown, error: string, errorCode: string): Frame {
  const response: Frame = { subtype: 'error' };
  if (typeof requestId === 'string') response.request_id = requestId;
  return { type: 'control_response', response: { ...response, error, error_code: errorCode } };
}

export function controlRequest(requestId: string, request: Frame): Frame {
  return { type: 'control_request', request_id: requestId, request };
}

export function controlCancel(requestId: string): Frame {
  return { type: 'control_cancel_request', request_id: requestId };
}

/**
 * `cancel_async_message` as the CLI answers it: the queued prompt with that uuid is taken out
 * of `queue` (its lifecycle written `cancelled`); the answer's payload says whether it was there.
 */
export function withdrawQueued(s: EngineState, queue: Array<{ uuid?: string }>, uuid: unknown, emit: (f: Frame) => void): Frame {
  const at = queue.findIndex((p) => p.uuid !== undefined && p.uuid === uuid);
  if (at < 0) return { cancelled: false };
  queue.splice(at, 1);
  emit(commandLifecycle(s, uuid as string, 'cancelled'));
  return { cancelled: true, message_uuid: uuid };
}

export function demoModels(): Frame[] {
  return [{ value: DEMO_MODEL, resolvedModel: DEMO_MODEL, displayName: 'Demo', description: 'Built-in demo engine' }];
}

export function initializePayload(s: EngineState, hooksGiven: boolean, busy: boolean): Frame {
  const payload: Frame = {
    commands: [],
    agents: [],
    output_style: 'default',
    available_output_styles: ['default'],
    models: demoModels(),
    account: { tokenSource: 'none', apiKeySource: 'none', apiProvider: 'demo' },
    pid: process.pid,
    claude_code_version: DEMO_VERSION,
    current_permission_mode: s.permissionMode,
    session_state: busy ? 'running' : 'idle',
    capabilities: [],
    hook_on_failure_supported: true,
  };
  if (hooksGiven) payload.hooks_applied = true;
  return payload;
}

export function contextUsagePayload(s: EngineState, tokens: number): Frame {
  const maxTokens = 200_000;
  return {
    categories: [{ id: 'messages', name: 'Messages', tokens, color: 'blue', kind: 'messages' }],
    totalTokens: tokens,
    maxTokens,
    rawMaxTokens: maxTokens,
    percentage: Math.round((tokens / maxTokens) * 10_000) / 100,
    gridRows: [],
    model: s.model,
    memoryFiles: [],
    mcpTools: [],
    agents: [],
    skills: [],
    isAutoCompactEnabled: false,
    apiUsage: null,
  };
}

export interface ResultInfo {
  isError: boolean;
  subtype: 'success' | 'error_during_execution';
  terminalReason: string;
  stopReason: string | null;
  text?: string;
  numTurns: number;
  denials: Frame[];
  inputTokens: number;
  outputTokens: number;
  durationMs: number;
  resultIndex: number;
  queued: number;
  userMessageUuids: string[];
}

export function result(s: EngineState, r: ResultInfo): Frame {
  const frame: Frame = {
    type: 'result',
    subtype: r.subtype,
    is_error: r.isError,
    duration_ms: r.durationMs,
    duration_api_ms: Math.round(r.durationMs * 0.8),
    num_turns: r.numTurns,
    stop_reason: r.stopReason,
    session_id: s.sessionId,
    total_cost_usd: 0,
    usage: { input_tokens: r.inputTokens, output_tokens: r.outputTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    permission_denials: r.denials,
    terminal_reason: r.terminalReason,
    uuid: randomUUID(),
    result_index: r.resultIndex,
    queued_turn_count: r.queued,
  };
  if (r.text !== undefined) frame.result = r.text;
  if (r.isError) frame.errors = [`Turn ended: ${r.terminalReason}`];
  if (r.userMessageUuids.length > 0) frame.user_message_uuids = r.userMessageUuids;
  return frame;
}

// ---- reading host answers ----------------------------------------------------------------

/** Thrown inside a turn when the host interrupts it. */
export class Interrupted extends Error {
  constructor(readonly terminalReason: 'aborted_streaming' | 'aborted_tools') {
    super(terminalReason);
  }
}

export type PermissionAnswer =
  | { behavior: 'allow'; updatedInput?: Record<string, unknown>; sessionRules?: string[] }
  | { behavior: 'deny'; message: string; interrupt?: boolean; failed?: boolean };

/** Reads the host's answer to a can_use_tool request (the envelope's inner `response` object). */
export function parseAnswer(response: Record<string, unknown>): PermissionAnswer {
  if (response.subtype === 'error') {
    return { behavior: 'deny', message: `Tool permission request failed: Error: ${String(response.error)}`, failed: true };
  }
  const r = isObject(response.response) ? response.response : {};
  if (r.behavior === 'allow')
    return {
      behavior: 'allow',
      updatedInput: isObject(r.updatedInput) ? r.updatedInput : undefined,
      sessionRules: sessionRules(r.updatedPermissions),
    };
  if (r.behavior === 'deny' && typeof r.message === 'string') {
    return { behavior: 'deny', message: r.message, interrupt: r.interrupt === true };
  }
  return {
    behavior: 'deny',
    failed: true,
    message:
      'The canUseTool callback returned an invalid permission result. ' +
      "Expected {behavior: 'allow', updatedInput?: object} or {behavior: 'deny', message: string}.",
  };
}

/** The allow rules an answer's `updatedPermissions` adds for the session, as `Tool(content)` strings (like --allowedTools). */
function sessionRules(updates: unknown): string[] {
  if (!Array.isArray(updates)) return [];
  return updates
    .filter((u) => isObject(u) && u.type === 'addRules' && u.behavior === 'allow' && u.destination === 'session' && Array.isArray(u.rules))
    .flatMap((u) =>
      (u.rules as unknown[])
        .filter(isObject)
        .map((r) => (typeof r.ruleContent === 'string' ? `${String(r.toolName)}(${r.ruleContent})` : String(r.toolName))),
    );
}

/** Does a --allowedTools rule (`Bash`, `Bash(echo *)`, `Bash(git log:*)`) allow this call? */
export function ruleAllows(rules: string[], tool: string, command: string): boolean {
  return rules.some((rule) => {
    if (rule === tool || rule === `${tool}(*)`) return true;
    const m = /^(\w+)\((.*)\)$/s.exec(rule);
    if (!m || m[1] !== tool) return false;
    const pattern = m[2]!
      .replace(/:\*$/, '*')
      .split('*')
      .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    return new RegExp(`^${pattern.join('.*')}$`, 's').test(command);
  });
}
