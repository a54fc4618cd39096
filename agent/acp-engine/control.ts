import type * as acp from '@agentclientprotocol/sdk';
import { POLICY_CALLBACK_ID } from '../../core/policy/hook.js';
import type { NamedToolCall } from './tool-calls.js';

/** Why a Claude-only control request gets an error from an ACP engine (never silence). */
export const UNSUPPORTED = 'is a Claude Code control request: an ACP engine has no such thing (docs/compatibility.md)';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Why an initialize cannot be honoured by an ACP engine, or undefined: only the policy hook
 * the agent merges in is run (by the engine process itself); SDK hooks, in-process MCP servers,
 * agents, system prompts and the like are the Claude CLI's and are refused by name.
 */
export function refusedInitialize(req: Record<string, unknown>): string | undefined {
  const extra = Object.keys(req).filter((k) => k !== 'subtype' && k !== 'hooks' && req[k] !== undefined && req[k] !== null);
  if (extra.length > 0) return `an ACP engine cannot take ${extra.join(', ')} in initialize (Claude Code only; docs/compatibility.md)`;
  if (!isObject(req.hooks)) return undefined;
  for (const [event, matchers] of Object.entries(req.hooks)) {
    const ids = Array.isArray(matchers)
      ? matchers.flatMap((m) => (isObject(m) && Array.isArray(m.hookCallbackIds) ? m.hookCallbackIds : [null]))
      : [null];
    if (event !== 'PreToolUse' || ids.some((i) => i !== POLICY_CALLBACK_ID))
      return `an ACP engine runs no SDK hooks (${event}): only Tether's policy hook (docs/compatibility.md)`;
  }
  return undefined;
}

/** The policy hook's answer as a decision; an error answer fails closed (deny), as the CLI's `onFailure: "block"`. */
export function policyDecision(r: Record<string, unknown> | undefined): { decision: 'allow' | 'deny' | 'ask' | 'none'; reason?: string } {
  if (r?.subtype !== 'success') return { decision: 'deny', reason: `Tether policy: no answer (${String(r?.error ?? 'cancelled')})` };
  const out = isObject(r.response) && isObject(r.response.hookSpecificOutput) ? r.response.hookSpecificOutput : undefined;
  const d = out?.permissionDecision;
  const reason = typeof out?.permissionDecisionReason === 'string' ? out.permissionDecisionReason : undefined;
  return d === 'allow' || d === 'deny' || d === 'ask' ? { decision: d, reason } : { decision: 'none' };
}

/**
 * The option that carries an answer: allow once (the engine's "always" is never chosen: a
 * session rule is the gateway's, kept per person), or reject once; `cancelled` when the
 * engine offers neither kind.
 */
export function answerOption(options: acp.PermissionOption[], allow: boolean): acp.RequestPermissionResponse {
  const kinds: acp.PermissionOptionKind[] = allow ? ['allow_once', 'allow_always'] : ['reject_once', 'reject_always'];
  for (const kind of kinds) {
    const o = options.find((x) => x.kind === kind);
    if (o) return { outcome: { outcome: 'selected', optionId: o.optionId } };
  }
  return { outcome: { outcome: 'cancelled' } };
}

/** "Allow for this session" as the suggestion a prompt offers: a rule on the call's path or command, kept at the gateway. */
export function sessionRules(call: NamedToolCall): unknown[] {
  const content =
    call.name === 'Bash' && typeof call.input.command === 'string'
      ? call.input.command
      : typeof call.input.file_path === 'string' && (call.name === 'Edit' || call.name === 'Read')
        ? `/${call.input.file_path}`
        : undefined;
  return [
    {
      type: 'addRules',
      rules: [content === undefined ? { toolName: call.name } : { toolName: call.name, ruleContent: content }],
      behavior: 'allow',
      destination: 'session',
    },
  ];
}
