import type { PermissionDecision, QuestionAnswer, RiskLevel } from '../../../core/protocol/jsonrpc-dialect.js';

/**
 * What the dialect's answers become in the engine's permission protocol
 * (engine-protocol.md sections 6 and 7), and how risky a tool call is.
 */

/** Tools that only read; everything else that edits files is medium; the rest (Bash, MCP, …) high. */
const LOW_RISK = new Set(['Read', 'Glob', 'Grep', 'LS', 'NotebookRead', 'WebSearch', 'WebFetch', 'TodoWrite', 'ExitPlanMode']);
const MEDIUM_RISK = new Set(['Edit', 'MultiEdit', 'Write', 'NotebookEdit']);

export function riskLevel(tool: string): RiskLevel {
  return LOW_RISK.has(tool) ? 'low' : MEDIUM_RISK.has(tool) ? 'medium' : 'high';
}

/**
 * The engine's permission answer for a dialect decision (`input` runs unchanged when allowed).
 * Session scope keeps the allow rules the engine proposed (`suggestions`, its
 * permission_suggestions) for this session only: the gateway accepts no wider rule and no
 * settings file (gateway/policy/prompt-answers.ts).
 */
export function permissionAnswer(
  _tool: string,
  input: Record<string, unknown>,
  d: PermissionDecision,
  suggestions: unknown[] = [],
): Record<string, unknown> {
  if (d.decision === 'deny') return { behavior: 'deny', message: d.message ?? 'The user denied this tool call.' };
  const proposed = suggestions.filter(
    (s): s is Record<string, unknown> =>
      typeof s === 'object' &&
      s !== null &&
      (s as { type?: unknown }).type === 'addRules' &&
      (s as { behavior?: unknown }).behavior === 'allow',
  );
  const rules =
    d.scope === 'session' && proposed.length > 0 ? { updatedPermissions: proposed.map((s) => ({ ...s, destination: 'session' })) } : {};
  return { behavior: 'allow', updatedInput: input, ...rules };
}

/** AskUserQuestion is answered by allowing it with `answers` added to its input; a dismissal denies it. */
export function questionAnswer(input: Record<string, unknown>, a: QuestionAnswer | undefined): Record<string, unknown> {
  if (!a || a.dismissed || !a.answers) return { behavior: 'deny', message: 'The user dismissed the question.' };
  return { behavior: 'allow', updatedInput: { ...input, answers: a.answers } };
}

/** The control_response line that carries an answer to the engine's request. */
export function controlResponse(requestId: string, response: Record<string, unknown>): Record<string, unknown> {
  return { type: 'control_response', response: { subtype: 'success', request_id: requestId, response } };
}
