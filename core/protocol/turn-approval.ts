import { z } from 'zod';

/**
 * Who must approve the tool calls of a turn whose author is not the session's owner
 * (docs/policy.md, "Whose approval a tool call needs"): `anyController` (any owner or
 * controller, the author included), `owner` (the owner alone), or `{ approvers }` (the owner or
 * one of the names listed, never the turn's author). A name is a principal (a token's `sub`);
 * `group:NAME` names a group of the policy file's `groups`.
 */
export const TurnApproval = z.union([
  z.literal('anyController'),
  z.literal('owner'),
  z.object({ approvers: z.array(z.string().min(1).max(256)).min(1).max(256) }).strict(),
]);
export type TurnApproval = z.infer<typeof TurnApproval>;

export { GROUP_PREFIX } from './turn-names.js';

/**
 * Whose turn a tool call comes from, and whose approval it needs: carried by the `prompt_turn`
 * event beside each permission prompt, and by `policy_decision` events and audit records.
 */
export const TurnAttribution = z.object({
  /** The principals whose prompts started or joined the turn, first the one that started it (`tether:unknown`: not known here). */
  turn_authors: z.array(z.string()),
  /** Present when not every controller may answer: the kind of approval, and who may give it. */
  approval: z.object({ needs: z.enum(['owner', 'approvers']), may_answer: z.array(z.string()) }).optional(),
});
export type TurnAttribution = z.infer<typeof TurnAttribution>;
