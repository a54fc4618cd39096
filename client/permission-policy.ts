/** A can_use_tool request from the engine, as a client sees it. */
export interface PermissionRequest {
  requestId: string;
  toolName: string;
  input: Record<string, unknown>;
  /** True for AskUserQuestion and other tools that need a person. */
  requiresUserInteraction: boolean;
  raw: Record<string, unknown>;
}

export type PermissionAnswer =
  | { behavior: 'allow'; updatedInput: Record<string, unknown>; updatedPermissions?: unknown[] }
  | { behavior: 'deny'; message: string; interrupt?: boolean };

/** A permission rule as the engine writes it in an `addRules` update. */
export interface PermissionRule {
  toolName: string;
  ruleContent?: string;
}

/** An `addRules` allow update: what "allow for this session" sends, and what a session's standing rules are made of. */
export interface SessionRuleUpdate {
  type: 'addRules';
  rules: PermissionRule[];
  behavior: 'allow';
  destination: 'session';
}

const isRule = (r: unknown): r is PermissionRule =>
  typeof r === 'object' &&
  r !== null &&
  typeof (r as PermissionRule).toolName === 'string' &&
  ['string', 'undefined'].includes(typeof (r as PermissionRule).ruleContent);

/**
 * What "allow for this session" may grant: the first allow rule the engine itself proposed for
 * this call (`permission_suggestions`), exactly, with its destination narrowed to the session.
 * Undefined when the engine proposed none: then nothing is offered beyond this one call (a rule
 * made up here, such as the bare tool name, would allow every later call of the tool).
 */
export function proposedSessionRule(request: Record<string, unknown>): SessionRuleUpdate | undefined {
  const suggestions = Array.isArray(request.permission_suggestions) ? (request.permission_suggestions as Record<string, unknown>[]) : [];
  const s = suggestions.find(
    (u) => u?.type === 'addRules' && u.behavior === 'allow' && Array.isArray(u.rules) && u.rules.length > 0 && u.rules.every(isRule),
  );
  return s ? { ...(s as unknown as SessionRuleUpdate), destination: 'session' } : undefined;
}

/** The rules of `addRules` allow updates (others skipped), e.g. from a decision that granted them. */
export function grantedRules(updates: unknown): PermissionRule[] {
  if (!Array.isArray(updates)) return [];
  return updates.flatMap((u) => (u?.type === 'addRules' && u.behavior === 'allow' && Array.isArray(u.rules) ? u.rules.filter(isRule) : []));
}

/** A rule as people read it and as settings files write it: `Bash(echo:*)`, or the bare tool name. */
export function ruleLabel(r: PermissionRule): string {
  return r.ruleContent ? `${r.toolName}(${r.ruleContent})` : r.toolName;
}

/** Reads a can_use_tool control_request from an engine frame, or undefined for anything else. */
export function asPermissionRequest(message: Record<string, unknown>): PermissionRequest | undefined {
  if (message.type !== 'control_request') return undefined;
  const req = message.request as Record<string, unknown> | undefined;
  if (req?.subtype !== 'can_use_tool' || typeof message.request_id !== 'string') return undefined;
  return {
    requestId: message.request_id,
    toolName: String(req.tool_name ?? ''),
    input: (req.input as Record<string, unknown>) ?? {},
    requiresUserInteraction: req.requires_user_interaction === true,
    raw: req,
  };
}

/** One AskUserQuestion question, as the engine sends it. */
export interface AskQuestion {
  question: string;
  header?: string;
  options: { label: string; description?: string }[];
  multiSelect?: boolean;
}

export function askQuestions(input: Record<string, unknown>): AskQuestion[] {
  return Array.isArray(input.questions) ? (input.questions as AskQuestion[]) : [];
}

/**
 * The answer the real CLI accepts for AskUserQuestion: allow, with `answers` keyed by the
 * question text added to the original input (engine-protocol.md section 7).
 */
export function answerQuestions(input: Record<string, unknown>, answers: Record<string, string>): PermissionAnswer {
  return { behavior: 'allow', updatedInput: { ...input, answers } };
}
