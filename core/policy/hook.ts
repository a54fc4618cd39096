/**
 * The PreToolUse hook every engine carries for the central policy: the agent registers it in
 * each initialize (agent/policy-hook.ts), the gateway answers its callbacks (gateway/policy/policy-gate.ts).
 * The callback id is reserved: the gateway answers every hook_callback carrying it and never
 * shows it to clients, so no client can answer in the policy's place.
 */

/** The callback id of the policy hook. */
export const POLICY_CALLBACK_ID = 'tether_policy';

/**
 * How long the engine waits for the gateway's answer (seconds); past it, `onFailure: "block"`
 * blocks the tool (fail closed), as does an error answer.
 */
export const POLICY_HOOK_TIMEOUT_S = 120;

/** What a new engine is started with for the central policy: its hook, and the agent's folders. */
export interface SpawnPolicy {
  hook?: boolean;
  roots?: { rule: string; folders: string[] };
}

/** The matcher: every tool (no `matcher`), blocking when the answer fails or never comes. */
export const POLICY_HOOK_MATCHER = Object.freeze({
  hookCallbackIds: [POLICY_CALLBACK_ID],
  timeout: POLICY_HOOK_TIMEOUT_S,
  onFailure: 'block' as const,
});
