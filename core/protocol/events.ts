import { z } from 'zod';
import { isoNow } from '../util/iso-now.js';

/**
 * Gateway events delivered in a session's stream beside the engine's frames. In pipe mode
 * they print as JSON lines with `"type": "tether"`, so scripts can tell them from engine frames.
 */
/** `unresponsive`: a control request (e.g. interrupt) went unanswered past the gateway's bound. */
export const SessionState = z.enum(['starting', 'idle', 'running', 'requires_action', 'agent-lost', 'unresponsive', 'ended']);
export type SessionState = z.infer<typeof SessionState>;

export const Role = z.enum(['owner', 'controller', 'viewer']);
export type Role = z.infer<typeof Role>;

/** One change of who is attached to a session, or with which role. */
export const PresenceChange = z.object({
  action: z.enum(['attached', 'detached', 'role_changed']),
  principal: z.string(),
  client_id: z.string(),
  role: Role,
  /** Whether this client's token allows control (so an owner is not offered to hand control to a view-only one); absent: not known. */
  may_control: z.boolean().optional(),
});
export type PresenceChange = z.infer<typeof PresenceChange>;

/**
 * The `engine_error` code of an input the agent refused before the engine saw it (a prompt
 * whose @-mention leads outside the session's folders: agent/mention-check.ts). The input is
 * accounted for (acknowledged, never re-sent); a prompt refused so starts no turn.
 */
export const INPUT_REFUSED = 'INPUT_REFUSED';

export const TetherEvent = z.discriminatedUnion('subtype', [
  z.object({ type: z.literal('tether'), subtype: z.literal('state'), state: SessionState, at: z.string() }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('presence'),
    ...PresenceChange.shape,
    /**
     * Further changes carried by the same event, in the order they happened, after the one at
     * the top level: the gateway coalesces the changes of a burst (many attaches at once) into
     * one event. Absent when there is one change. An entry leaves out `action`, `principal`
     * and `role` when they are those of the change before it (a burst is mostly alike).
     */
    more: z.array(PresenceChange.partial({ action: true, principal: true, role: true })).optional(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('exited'),
    code: z.number().int().nullable(),
    signal: z.string().nullable(),
    stderr_tail: z.string(),
    reason: z.string().optional(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('engine_error'),
    code: z.string(),
    message: z.string(),
    preview: z.string().optional(),
    /** The `uuid` of the input the error is about (INPUT_REFUSED), when it carried one. */
    input_uuid: z.string().optional(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('gap'),
    from_seq: z.number().int(),
    to_seq: z.number().int(),
    message: z.string(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('prompt_decided'),
    request_id: z.string(),
    decided_by: z.string(),
    behavior: z.string(),
    /** The permission updates the answer carried (`updatedPermissions`): rules it granted, shown to every member with who granted them. */
    updated_permissions: z.array(z.unknown()).optional(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('rule_withdrawn'),
    /** A standing rule of the session as the engine names it, e.g. `Bash(echo a *)`. */
    rule: z.string(),
    withdrawn_by: z.string(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('policy_decision'),
    /** The tool call the central policy decided (the engine's tool_use id and tool name). */
    tool_use_id: z.string(),
    tool: z.string(),
    /** deny: the tool never ran; ask: people decide (a permission prompt follows); allow: ran without asking. */
    decision: z.enum(['deny', 'ask', 'allow']),
    /** The rule that decided, as written in the policy file, e.g. `Bash(rm *)`. */
    rule: z.string(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('prompt'),
    principal: z.string(),
    client_id: z.string(),
    /** The user message exactly as sent to the engine (its `message` field). */
    message: z.unknown(),
    /** The sender's input id: the sender's answer to a `session.post` (absent from older gateways). */
    input_id: z.string().optional(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('error'),
    code: z.string(),
    message: z.string(),
    /** The input this error answers, in pipe mode (line number or input id). */
    input: z.string().optional(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    /** A member interrupted the running turn (its control request reached the engine): who, for every member. */
    subtype: z.literal('interrupt'),
    principal: z.string(),
    client_id: z.string(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    /** The session moved to another agent (session.move): its engine there resumed the transcript. */
    subtype: z.literal('moved'),
    from_agent: z.string(),
    to_agent: z.string(),
    cwd: z.string().optional(),
    moved_by: z.string(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    /** The owner handed the session to another principal (session.set_owner). */
    subtype: z.literal('owner_changed'),
    owner: z.string(),
    previous_owner: z.string(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    /** The agent came back without the session's engine and started a new one on its transcript (`--resume`): same session, same seqs. */
    subtype: z.literal('engine_resumed'),
    /** How long the session had no engine, from the agent's link loss to the new engine's start (ms). */
    gap_ms: z.number().int().nonnegative(),
    /** A turn was running when the old engine died: it was cut short, and its result never comes. */
    interrupted_turn: z.boolean(),
    /** Inputs the old engine never acknowledged, handed to the new one (each once). */
    resent_inputs: z.number().int().nonnegative(),
    message: z.string(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    subtype: z.literal('link'),
    status: z.enum(['connected', 'down', 'resuming']),
    message: z.string(),
    at: z.string(),
  }),
]);
export type TetherEvent = z.infer<typeof TetherEvent>;

/** Distributes Omit over a union, so each event keeps its own fields. */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
export type TetherEventInput = DistributiveOmit<TetherEvent, 'type' | 'at'>;

/** Builds an event with its `type` and timestamp filled in. */
export function tetherEvent(e: TetherEventInput): TetherEvent {
  return { type: 'tether', ...e, at: isoNow() } as TetherEvent;
}

/** The notice a client gets instead of frames `from`..`to`, which are no longer held. */
export function gapEvent(from: number, to: number, resumesAt = to + 1): TetherEvent {
  return tetherEvent({ subtype: 'gap', from_seq: from, to_seq: to, message: `frames ${from}..${to} are no longer held; history resumes at ${resumesAt}` });
}
