import { z } from 'zod';
import { isoNow } from '../util/iso-now.js';
import { PROMPT_PRIORITIES } from './prompt-priority.js';
import { TurnAttribution } from './turn-approval.js';
import { WorktreeInfo } from './worktree.js';
import { UsageFigures } from './usage.js';

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
  /** The member's display name from the identity provider (OIDC sign-in), when known; `principal` stays the stable subject. */
  name: z.string().max(256).optional(),
});
export type PresenceChange = z.infer<typeof PresenceChange>;

/**
 * The `engine_error` code of an input the agent refused before the engine saw it (a prompt
 * whose @-mention leads outside the session's folders: agent/mention-check.ts). The input is
 * accounted for (acknowledged, never re-sent); a prompt refused so starts no turn.
 */
export const INPUT_REFUSED = 'INPUT_REFUSED';

/** A prompt's `priority` (core/protocol/prompt-priority.ts). */
export const PromptPriority = z.enum(PROMPT_PRIORITIES);
export type PromptPriority = z.infer<typeof PromptPriority>;

/** One prompt waiting for its turn, as every member sees it. */
export const QueuedPrompt = z.object({
  /** The prompt's uuid (the engine's handle): what a withdrawal names. */
  uuid: z.string(),
  /** Its author. */
  principal: z.string(),
  client_id: z.string(),
  priority: PromptPriority,
  /** The user message as sent to the engine (its `message` field). */
  message: z.unknown(),
  /** A withdrawal was asked (by this principal) and the engine has not confirmed it yet. */
  withdrawing: z.string().optional(),
});
export type QueuedPrompt = z.infer<typeof QueuedPrompt>;

/** What changed the queue: a prompt queued, one started (folded into the running turn or a turn of its own), withdrawn, or the queue cleared by a stop. */
export const QueueChange = z.object({
  action: z.enum(['queued', 'started', 'withdrawing', 'withdrawn', 'cleared']),
  uuids: z.array(z.string()),
  /** Who withdrew or cleared; for `started`, the prompt's author. */
  by: z.string().optional(),
  /** `started` only: it joined the turn that was running (a tool round's boundary) rather than starting its own. */
  folded: z.boolean().optional(),
  /** `started` only: it was a steer (priority `now`): the running step was cut for it. */
  steer: z.boolean().optional(),
});
export type QueueChange = z.infer<typeof QueueChange>;

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
    /** Whose turns the session rules it granted hold for: its grantor's name, or `*` (everyone: the owner's rules). */
    granted_for: z.string().optional(),
    /** The standing rule that answered (then `decided_by` is the rule's grantor, and no person was asked). */
    rule: z.string().optional(),
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
    /** Whose turn the call comes from. */
    turn_authors: z.array(z.string()).optional(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    /** The engine took up a prompt: it started a turn, or joined the running one; `authors`: the turn's authors now. */
    subtype: z.literal('turn'),
    state: z.enum(['started', 'joined']),
    /** The prompt's uuid (as stamped by the gateway). */
    uuid: z.string(),
    authors: z.array(z.string()),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    /** Sent just before the permission prompt `request_id` reaches members: whose turn the call comes from and who may answer it. */
    subtype: z.literal('prompt_turn'),
    request_id: z.string(),
    tool: z.string().optional(),
    ...TurnAttribution.shape,
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
    /** The prompt's uuid, when its sender gave one (Tether's clients do). */
    uuid: z.string().optional(),
    /** Sent while a turn ran: it waits in the queue (see the `queued` event) until it starts. */
    queued: z.boolean().optional(),
    priority: PromptPriority.optional(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    /** The session's queue of prompts, whole, after each change: in the order they will run. */
    subtype: z.literal('queued'),
    prompts: z.array(QueuedPrompt),
    change: QueueChange,
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
    /** How many queued prompts the stop cleared (`cancel_queued`); absent when it left the queue. */
    cleared: z.number().int().nonnegative().optional(),
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
    /** The session's title changed: its owner renamed it (session.rename), or the engine named it (system/session_title_changed). */
    subtype: z.literal('title_changed'),
    title: z.string(),
    /** Who named it: the owner's principal, or `engine`. */
    by: z.string(),
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
    /** The session's git worktree (options.worktree): said by the agent when it created it, and again before `exited` once it removed or kept it. */
    subtype: z.literal('worktree'),
    worktree: WorktreeInfo,
  }),
  z.object({
    type: z.literal('tether'),
    /** A turn ended and the gateway booked what it used (the usage ledger): the turn's own figures and the session's cost so far. */
    subtype: z.literal('usage'),
    /** Whose prompt started the turn. */
    principal: z.string(),
    model: z.string(),
    ...UsageFigures.shape,
    /** The session's cost so far, this turn included (USD). */
    session_cost_usd: z.number().nonnegative(),
    at: z.string(),
  }),
  z.object({
    type: z.literal('tether'),
    /** A turn took `principal` past a budget's warning share (`warning`) or to its end (`reached`: their next prompt is refused). */
    subtype: z.literal('budget'),
    principal: z.string(),
    state: z.enum(['warning', 'reached']),
    /** The budget as the policy file says it, e.g. `budgets[0] (who: *, per: day, usd: 5)`. */
    budget: z.string(),
    share: z.number().nonnegative(),
    message: z.string(),
    resets_at: z.string().optional(),
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
  return tetherEvent({
    subtype: 'gap',
    from_seq: from,
    to_seq: to,
    message: `frames ${from}..${to} are no longer held; history resumes at ${resumesAt}`,
  });
}
