import { TetherError } from '../../core/errors.js';
import { POLICY_CALLBACK_ID } from '../../core/policy/hook.js';
import { mentionsInLine } from '../../core/policy/mentions.js';
import { MODE_ORDER, type Asker, type Policy, type ToolDecision } from '../../core/policy/policy.js';
import { normalizePath, type ToolCall } from '../../core/policy/rules.js';
import type { SessionOptions } from '../../core/protocol/session-options.js';
import { ENGINE_DEFAULT_MODE, engineChoices, subagentModels } from '../../core/engine-choices.js';
import type { LineMeta } from '../../core/protocol/methods.js';
import type { Logger } from '../../core/logging.js';
import { failureCode, recordQuietly, type AuditLog } from '../audit/audit-log.js';
import { checkControl, setCwdTarget, type EngineControlAllowance } from '../../core/engine-controls.js';
import { hookAnswerEffects } from './prompt-answers.js';
import type { PolicyProvider } from './policy-source.js';
import type { Principal } from '../door/principal.js';

/**
 * Where the central policy meets the engine, at the gateway: it answers the policy hook's
 * callbacks as they pass (the gateway holds the one policy, reloads it in one place and
 * writes the audit trail, so agents never hold rules that could be stale or edited on their
 * machine), and it refuses requests above the policy before they reach the engine.
 */

/** The audit principal of the policy's own decisions. */
export const POLICY_PRINCIPAL = 'tether:policy';

/** Largest serialised tool input kept whole in an audit record; larger ones keep a head. */
export const AUDIT_MAX_INPUT_CHARS = 8 * 1024;

/** One call of the policy hook, read from the engine's hook_callback request. */
export interface PolicyHookCall {
  requestId: string;
  event: string;
  tool: string;
  toolUseId: string;
  input: Record<string, unknown>;
  cwd: string;
  permissionMode: string | undefined;
  /** The folder and path with symlinks followed, as the agent found them on its machine. */
  resolved?: LineMeta['resolved'];
}

/** The policy hook's callback in this engine line, if it is one (parsed only for hook callbacks). */
export function policyHookCall(meta: LineMeta, line: Uint8Array): PolicyHookCall | undefined {
  if (meta.type !== 'control_request' || meta.subtype !== 'hook_callback' || !meta.request_id) return undefined;
  let v: { request?: { callback_id?: unknown; tool_use_id?: unknown; input?: Record<string, unknown> } };
  try {
    v = JSON.parse(Buffer.from(line.buffer, line.byteOffset, line.byteLength).toString('utf8'));
  } catch {
    return undefined;
  }
  const r = v.request;
  if (r?.callback_id !== POLICY_CALLBACK_ID) return undefined;
  const i = r.input ?? {};
  const str = (x: unknown) => (typeof x === 'string' ? x : undefined);
  return {
    requestId: meta.request_id,
    event: str(i.hook_event_name) ?? '',
    tool: str(i.tool_name) ?? '',
    toolUseId: str(i.tool_use_id) ?? str(r.tool_use_id) ?? '',
    input: typeof i.tool_input === 'object' && i.tool_input !== null ? (i.tool_input as Record<string, unknown>) : {},
    cwd: str(i.cwd) ?? '/',
    permissionMode: str(i.permission_mode),
    resolved: meta.resolved,
  };
}

/** The request body of an engine control request the session raises as a prompt (parsed only for can_use_tool and hook_callback: their answers are checked). */
export function promptRequest(meta: LineMeta, line: Uint8Array): Record<string, unknown> | undefined {
  if (meta.subtype !== 'can_use_tool' && meta.subtype !== 'hook_callback') return undefined;
  try {
    return (
      (JSON.parse(Buffer.from(line.buffer, line.byteOffset, line.byteLength).toString('utf8')) as { request?: Record<string, unknown> })
        .request ?? {}
    );
  } catch {
    return undefined;
  }
}

/**
 * For a can_use_tool prompt: the tool call it asks about (`tool`, `tool_use_id`, `input`
 * capped), so the audit record of a person's answer says what was decided.
 */
export function promptTool(request: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (request?.subtype !== 'can_use_tool') return undefined;
  return { tool: request.tool_name, tool_use_id: request.tool_use_id, input: cappedInput(request.input) };
}

/** A tool input for the audit: whole up to AUDIT_MAX_INPUT_CHARS serialised, else its head. */
export function cappedInput(input: unknown): unknown {
  const text = JSON.stringify(input) ?? 'null';
  return text.length <= AUDIT_MAX_INPUT_CHARS ? input : { truncated: true, chars: text.length, head: text.slice(0, AUDIT_MAX_INPUT_CHARS) };
}

/**
 * Refuses (PERMISSION_DENIED, naming the rule) an answer to a prompt whose permission updates
 * set a mode above the answerer's ceiling; the rest of the answer is checked against the
 * prompt itself (gateway/policy/prompt-answers.ts).
 */
export function checkAnswerModes(policy: Policy, line: Record<string, unknown>, asker: Asker): void {
  const body = (line.response as { response?: unknown } | undefined)?.response;
  if (typeof body !== 'object' || body === null) return;
  const answer = body as Record<string, unknown>;
  // A permission answer's own updates, and those a hook callback's answer carries (a PermissionRequest decision's).
  for (const updates of [answer.updatedPermissions, ...hookAnswerEffects(answer).map((e) => e.updatedPermissions)]) {
    if (!Array.isArray(updates)) continue;
    for (const u of updates) {
      const mode = (u as { type?: unknown; mode?: unknown } | null)?.type === 'setMode' ? (u as { mode?: unknown }).mode : undefined;
      if (typeof mode === 'string') policy.checkMode(mode, asker);
    }
  }
}

/** The policy's decision for one hook call (only PreToolUse calls are decided). */
export function decideHook(policy: Policy, call: PolicyHookCall): ToolDecision {
  if (call.event !== 'PreToolUse' || !call.tool) return { decision: 'none' };
  return policy.decide({ tool: call.tool, input: call.input, cwd: call.cwd, resolved: call.resolved }, call.permissionMode);
}

/** The engine line that answers the hook with a decision (`{}`: no opinion, the engine goes on). */
export function hookAnswer(requestId: string, d: ToolDecision, reason?: string): Record<string, unknown> {
  const why = reason ?? (d.rule ? `Tether policy: ${d.decision} rule ${d.rule}` : undefined);
  const output =
    d.decision === 'none'
      ? {}
      : { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: d.decision, permissionDecisionReason: why } };
  return { type: 'control_response', response: { subtype: 'success', request_id: requestId, response: output } };
}

/** The audit record's details for one decision: tool, capped input, decision, rule, mode. */
export function hookAuditDetails(call: PolicyHookCall, d: ToolDecision): Record<string, unknown> {
  const details: Record<string, unknown> = {
    tool: call.tool,
    tool_use_id: call.toolUseId,
    input: cappedInput(call.input),
    decision: d.decision,
    rule: d.rule ?? null,
    permission_mode: call.permissionMode ?? null,
    cwd: call.cwd,
  };
  if (call.resolved?.path !== undefined) details.resolved_path = call.resolved.path;
  return details;
}

/**
 * Refuses (PERMISSION_DENIED, naming the rule) session options above the policy: a mode above
 * the creator's ceiling, a model off the list, a folder outside the agent's roots, or the same
 * through extra CLI arguments, judged as the CLI will read the argv the agent builds
 * (core/engine-choices.ts): every use of each flag, whichever the CLI keeps. An unknown mode
 * name is INVALID_ARGUMENT. Returns the options to use: the policy's model when none is named,
 * and the client's ceiling as the mode when none is named and the ceiling is below `default`.
 */
export function checkSessionOptions(policy: Policy, agent: string, options: SessionOptions, asker: Asker): SessionOptions {
  const c = engineChoices(options);
  const modes = c.skipsPermissions ? [...c.modes, 'bypassPermissions'] : c.modes;
  for (const mode of modes) policy.checkMode(mode, asker);
  for (const model of [...c.models, ...c.fallbackModels, ...c.agentModels]) policy.checkModel(model);
  for (const settings of c.settings) checkSettings(policy, inlineSettings(settings), asker);
  policy.checkFolder(agent, options.cwd);
  policy.checkTurnApproval(agent, options.turn_approval);
  let out = c.models.length === 0 && policy.defaultModel ? { ...options, model: policy.defaultModel } : options;
  // Named no mode: the agent starts the engine in `default`; under a lower ceiling, the ceiling's.
  const ceiling = modes.length === 0 ? policy.ceilingFor(asker) : undefined;
  if (ceiling && MODE_ORDER.indexOf(ceiling.mode) < MODE_ORDER.indexOf(ENGINE_DEFAULT_MODE))
    out = { ...out, permission_mode: ceiling.mode };
  return out;
}

/** `--settings` given as inline JSON (the CLI reads a value that parses as JSON so); a file path: undefined. */
function inlineSettings(value: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(value);
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Settings that set the mode or the model, as an update_settings request or `--settings` JSON carries them. */
function checkSettings(policy: Policy, settings: Record<string, unknown> | undefined, asker: Asker): void {
  const s = (settings ?? {}) as { model?: unknown; permissions?: { defaultMode?: unknown } };
  const mode = s.permissions?.defaultMode;
  // null (the setting cleared) is judged as the mode an engine starts in without one.
  if (mode !== undefined)
    policy.checkMode(mode === null ? ENGINE_DEFAULT_MODE : typeof mode === 'string' ? mode : JSON.stringify(mode), asker);
  if (s.model !== undefined) policy.checkModel(s.model as string | null);
}

/** Refuses a client's control request above the policy (set_permission_mode, set_model, settings that set either). */
export function checkControlRequest(policy: Policy, request: Record<string, unknown>, asker: Asker, cwd = '/', agent?: string): void {
  switch (request.subtype) {
    case 'set_cwd': // held to the policy's folders as a create's cwd is
      if (agent !== undefined) policy.checkFolder(agent, setCwdTarget(request));
      return;
    // Host requests that reach a tool or a file without a tool call (so without the hook):
    // refused when a deny or ask rule covers what they would touch.
    case 'mcp_call':
      return checkDirect(
        policy,
        { tool: String(request.tool ?? ''), input: (request.arguments ?? {}) as Record<string, unknown>, cwd },
        'mcp_call',
      );
    case 'read_file':
      return checkDirect(policy, { tool: 'Read', input: { file_path: String(request.path ?? '') }, cwd }, 'read_file');
    case 'set_permission_mode':
      policy.checkMode(typeof request.mode === 'string' ? request.mode : (JSON.stringify(request.mode) ?? 'undefined'), asker);
      return;
    case 'set_model':
      policy.checkModel(request.model as string | null | undefined);
      return;
    case 'initialize': // a subagent's model is a model the session runs
      for (const model of subagentModels(request.agents)) policy.checkModel(model);
      if (typeof request.settings === 'object' && request.settings !== null)
        checkSettings(policy, request.settings as Record<string, unknown>, asker);
      return;
    case 'apply_flag_settings':
    case 'update_settings':
      return checkSettings(policy, request.settings as Record<string, unknown> | undefined, asker);
    default:
  }
}

function checkDirect(policy: Policy, call: ToolCall, subtype: string): void {
  const d = policy.decide(call, undefined);
  if (d.decision === 'deny' || d.decision === 'ask') {
    throw new TetherError(
      'PERMISSION_DENIED',
      `${subtype} of ${call.tool} is refused: it would bypass the policy's ${d.decision} rule (policy rule: ${d.rule})`,
    );
  }
}

/** Deepest mention judged in a session whose folder is unknown (each folder above it is a candidate). */
export const MAX_MENTION_DEPTH = 64;

/**
 * Refuses (PERMISSION_DENIED, naming the rule and the mention) a prompt with an @-mention a deny
 * or ask rule covers: the engine reads a mentioned file into the prompt (and lists a mentioned
 * folder) with no tool call, so neither the policy hook nor a person would see it. Each mention
 * is judged as the Read of a file and the LS of a folder, from the session's folder; when the
 * session named none (the agent's default, unknown here) from every folder above the mention,
 * so a rule anchored at the folder matches wherever it is. Paths are judged as written; the
 * agent resolves symlinks and `~` (agent/mention-check.ts).
 */
export function checkMentions(policy: Policy, line: Record<string, unknown>, cwd: string | undefined): void {
  for (const mention of mentionsInLine(line)) {
    // Unknown folder: a relative mention is taken from "/", and judged from each folder above it.
    const path = cwd !== undefined ? mention : normalizePath(mention.startsWith('/') ? mention : `/${mention}`);
    for (const folder of cwd !== undefined ? [cwd] : foldersAbove(path, mention)) {
      for (const call of [
        { tool: 'Read', input: { file_path: path } },
        { tool: 'LS', input: { path } },
      ]) {
        const d = policy.decide({ ...call, cwd: folder }, undefined);
        if (d.decision === 'deny' || d.decision === 'ask') {
          throw new TetherError(
            'PERMISSION_DENIED',
            `the prompt mentions @${mention}, which the engine would read without a tool call; the policy's ${d.decision} rule covers it (policy rule: ${d.rule})`,
          );
        }
      }
    }
  }
}

/** "/", "/a", "/a/b" for the absolute, normalised "/a/b/c". */
function foldersAbove(path: string, mention: string): string[] {
  const segments = path.split('/').slice(1, -1);
  if (segments.length > MAX_MENTION_DEPTH)
    throw new TetherError('INVALID_ARGUMENT', `the prompt mentions @${mention}, deeper than ${MAX_MENTION_DEPTH} folders`, {
      limit: MAX_MENTION_DEPTH,
    });
  const out = ['/'];
  for (const seg of segments) out.push(`${out.at(-1) === '/' ? '' : out.at(-1)}/${seg}`);
  return out;
}

/** The session a client's control request goes to, as the gate needs it. */
export interface GateSession {
  id: string;
  agent: string;
  options: { cwd?: string };
}

/**
 * A client's control request on its way to a session, checked before anything is stored or
 * queued: the subtype against the engine's control table and the agent owner's allowances
 * (core/engine-controls.ts; the agent checks again), then against the central policy
 * ({@link checkControlRequest}). A refusal is recorded (action `control`, `result: "refused"`,
 * `decided_by: "tether:policy"`).
 */
export function checkControlAudited(
  dir: { policy: PolicyProvider; audit: AuditLog; log: Logger; controlAllowance(agent: string): EngineControlAllowance },
  session: GateSession,
  p: Principal,
  clientId: string,
  line: Record<string, unknown>,
  role: Asker['role'],
): void {
  const request = (typeof line.request === 'object' && line.request !== null ? line.request : {}) as Record<string, unknown>;
  try {
    checkControl(request, dir.controlAllowance(session.agent), session.agent, role ?? 'viewer');
    checkControlRequest(dir.policy.current, request, { ...p, role }, session.options.cwd, session.agent);
  } catch (err) {
    const subtype = typeof request.subtype === 'string' ? request.subtype.slice(0, 64) : undefined;
    const entry = {
      session_id: session.id,
      principal: p.sub,
      action: 'control' as const,
      client_id: clientId,
      subtype,
      mode: request.mode,
      model: request.model,
    };
    recordQuietly(
      dir.audit,
      { ...entry, result: 'refused', code: failureCode(err), reason: (err as Error).message, decided_by: POLICY_PRINCIPAL },
      dir.log,
    );
    throw err;
  }
}

/** The reason given to the engine when a decision cannot be audited: deny (fail closed). */
export function unauditedDenial(err: unknown): string {
  return `Tether policy: denied because the audit trail cannot be written (${err instanceof TetherError ? err.code : 'INTERNAL'})`;
}
