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
