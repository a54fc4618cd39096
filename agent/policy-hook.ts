import { POLICY_HOOK_MATCHER } from '../core/policy/hook.js';
import type { InitializeContribution } from './initialize-merge.js';

/**
 * The agent's part of the central policy (docs/policy.md): a PreToolUse hook for every tool,
 * `onFailure: "block"`, merged into every initialize its engines see (agent/initialize-merge.ts),
 * the client's own included, so no client can remove it. The gateway answers its callbacks.
 * Contributed only to engines the gateway starts with `policy_hook: true`.
 */
export const POLICY_CONTRIBUTION: InitializeContribution = Object.freeze({
  hooks: { PreToolUse: [{ ...POLICY_HOOK_MATCHER, hookCallbackIds: [...POLICY_HOOK_MATCHER.hookCallbackIds] }] },
});
