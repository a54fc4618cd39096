import type { Policy } from '../../core/policy/policy.js';

/** Answers whose `models[]` lists what a client may pick (engine-protocol.md §5.2). */
const MODEL_LIST_SUBTYPES = new Set(['initialize', 'list_models']);

/** Whether the policy lets a session use `model` (checkModel is the one judge). */
function allowed(policy: Policy, model: unknown): boolean {
  if (typeof model !== 'string') return false;
  try {
    policy.checkModel(model);
    return true;
  } catch {
    return false;
  }
}

/**
 * The engine's answer to `initialize` or `list_models` with its `models[]` cut to what the
 * policy's `models` list allows, so a picker offers only models a `set_model` may name. An
 * entry whose alias (`value`, e.g. "sonnet") the policy does not name but whose
 * `resolvedModel` it does is offered under the resolved name. Any other answer, or a policy
 * without a models list, passes byte for byte.
 */
export function policyModelList(subtype: string, line: string, policy: Policy): string {
  if (!MODEL_LIST_SUBTYPES.has(subtype) || !policy.source.models) return line;
  let value: { response?: { subtype?: string; response?: { models?: unknown } } };
  try {
    value = JSON.parse(line);
  } catch {
    return line;
  }
  const body = value.response?.response;
  if (value.response?.subtype !== 'success' || !body || !Array.isArray(body.models)) return line;
  body.models = body.models.flatMap((m: Record<string, unknown>) => {
    if (typeof m !== 'object' || m === null) return [];
    if (allowed(policy, m.value)) return [m];
    return allowed(policy, m.resolvedModel) ? [{ ...m, value: m.resolvedModel }] : [];
  });
  return JSON.stringify(value);
}
