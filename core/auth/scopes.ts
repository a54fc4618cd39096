import { TetherError } from '../errors.js';
import type { Principal } from './principal.js';

/**
 * What a client token may do. The token's `scope` claim holds scopes separated by spaces;
 * `tether token` takes one per `--scope`.
 *
 * ```
 * scope  = action | agent
 * action = "view" | "create" | "control" | "admin"
 * agent  = "agent:" NAME        NAME: 1-128 of [A-Za-z0-9._-] (an agent name), or "*"
 * ```
 *
 * - No scope at all: create and control on every agent (what `tether up` prints).
 * - Actions: with none given, create + control. `view` lists and attaches read-only (every
 *   client token may do that on the agents it names); `create` opens sessions; `control` sends
 *   prompts, answers permission prompts, interrupts, changes model or mode and stops;
 *   `admin` sees and lists every agent and session whatever the agent scopes say (attaching
 *   as a viewer unless `control` is also given).
 * - Agents: with no `agent:` scope, every agent; otherwise only the named ones (`agent:*`
 *   is every agent).
 *
 * An unknown scope is refused, at minting and at verification (fail closed).
 */
export const SCOPE_ACTIONS = ['view', 'create', 'control', 'admin'] as const;

/** One action scope. */
export type ScopeAction = (typeof SCOPE_ACTIONS)[number];

const AGENT_NAME = /^[A-Za-z0-9._-]{1,128}$/;
const MAX_SCOPES = 64;

/** Checks scope strings against the grammar; returns them deduplicated. Throws INVALID_ARGUMENT. */
export function checkScopes(scopes: readonly string[]): string[] {
  if (scopes.length > MAX_SCOPES) throw new TetherError('INVALID_ARGUMENT', `too many scopes (${scopes.length}; at most ${MAX_SCOPES})`);
  for (const s of scopes) {
    if ((SCOPE_ACTIONS as readonly string[]).includes(s)) continue;
    if (s.startsWith('agent:') && (s === 'agent:*' || AGENT_NAME.test(s.slice('agent:'.length)))) continue;
    throw new TetherError(
      'INVALID_ARGUMENT',
      `unknown scope ${JSON.stringify(s.slice(0, 64))} (expected view, create, control, admin or agent:NAME)`,
    );
  }
  return [...new Set(scopes)];
}

/** The client principal a set of scopes grants (see {@link SCOPE_ACTIONS} for the grammar). */
export function principalFromScopes(sub: string, scopes: readonly string[]): Principal {
  const checked = checkScopes(scopes);
  const actions = checked.filter((s) => !s.startsWith('agent:'));
  const agents = checked.filter((s) => s.startsWith('agent:')).map((s) => s.slice('agent:'.length));
  const has = (a: ScopeAction) => (actions.length === 0 ? a === 'create' || a === 'control' : actions.includes(a));
  return {
    sub,
    kind: 'client',
    canCreate: has('create'),
    canControl: has('control'),
    canAdmin: has('admin'),
    agents: agents.length === 0 || agents.includes('*') ? undefined : agents,
  };
}

/** Checks an agent name for an agent token (same rule as the hello's agent name). */
export function checkAgentName(name: string): string {
  if (!AGENT_NAME.test(name))
    throw new TetherError(
      'INVALID_ARGUMENT',
      `agent name ${JSON.stringify(name.slice(0, 64))} must be 1-128 letters, digits, dot, dash or underscore`,
    );
  return name;
}
