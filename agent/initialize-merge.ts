/**
 * The one place where the `initialize` an engine sees is put together. An engine reads
 * exactly one initialize at start: the client's own when the session was opened with
 * `client_initialize` (an SDK drop-in sends the prompt fields, agents and hooks there, and the
 * CLI ignores prompt fields in a second initialize), else the agent's default. Either way
 * the agent's contribution is merged in, and a client's later re-initialize gets it merged
 * again, so a client can never remove it (a re-initialize's `hooks` map replaces the whole
 * set: docs/engine-protocol.md section 8).
 *
 * The contribution is empty unless the gateway enforces a central policy: then it is the
 * policy's PreToolUse hook (agent/policy-hook.ts: matcher omitted, `onFailure: "block"`,
 * answered by the gateway).
 */

/** One hook matcher as the CLI reads it in `initialize.hooks[event]`. */
export interface HookMatcher {
  matcher?: string | null;
  hookCallbackIds: string[];
  timeout?: number;
  onFailure?: 'block' | 'continue';
  [key: string]: unknown;
}

/** What the agent must have in every initialize its engines see. */
export interface InitializeContribution {
  /** Matchers appended (after the client's own) to each named hook event. */
  hooks?: Record<string, HookMatcher[]>;
}

/** The agent adds nothing today. */
export const NO_CONTRIBUTION: InitializeContribution = Object.freeze({});

/** Whether a frame is an `initialize` control request. */
export function isInitializeRequest(line: Record<string, unknown>): boolean {
  return line.type === 'control_request' && (line.request as { subtype?: unknown } | undefined)?.subtype === 'initialize';
}

/**
 * The `request` body of an initialize with `contribution` merged into the client's `request`
 * (every other field of the client's is kept as sent). `first` says whether this is the
 * engine's first initialize: a later one with `hooks: null` keeps the engine's current set
 * (which already holds the contribution), so it is left null.
 */
export function mergeInitialize(
  request: Record<string, unknown>,
  contribution: InitializeContribution,
  first: boolean,
): Record<string, unknown> {
  const own = contribution.hooks ?? {};
  if (Object.keys(own).length === 0) return request;
  const clientHooks = request.hooks;
  if ((clientHooks === null || clientHooks === undefined) && !first) return request;
  const merged: Record<string, unknown[]> = {};
  if (clientHooks && typeof clientHooks === 'object' && !Array.isArray(clientHooks)) {
    for (const [event, matchers] of Object.entries(clientHooks as Record<string, unknown>))
      merged[event] = Array.isArray(matchers) ? [...matchers] : [];
  }
  for (const [event, matchers] of Object.entries(own)) merged[event] = [...(merged[event] ?? []), ...matchers];
  return { ...request, hooks: merged };
}

/** The agent's own initialize body, for sessions whose client brings none. */
export function defaultInitialize(contribution: InitializeContribution): Record<string, unknown> {
  return mergeInitialize({ subtype: 'initialize', hooks: null }, contribution, true);
}
