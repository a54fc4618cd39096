import type { LineMeta } from '../../core/protocol/methods.js';
import type { ControlRouting } from './control-routing.js';
import type { SessionHistory } from './history/session-history.js';
import type { SessionMembers } from './session-members.js';
import type { SessionPrompts } from './turns/session-prompts.js';
import type { SessionStatus } from './session-status.js';
import type { PromptQueue } from './turns/prompt-queue.js';
import { policyHookCall, promptRequest } from '../policy/policy-gate.js';
import { policyModelList } from '../policy/model-list.js';
import type { PolicyProvider } from '../policy/policy-source.js';
import { UNKNOWN_AUTHOR, type TurnAuthors } from './turns/turn-authors.js';
import { tetherEvent } from '../../core/protocol/events.js';
import type { SessionAudit } from './session-audit.js';
import type { UsageDesk } from '../usage/usage-desk.js';
import { figuresOf } from '../../core/protocol/usage.js';

/** What output routing works with: the session's other parts. */
export interface OutputParts {
  history: SessionHistory;
  prompts: SessionPrompts;
  status: SessionStatus;
  controls: ControlRouting;
  members: SessionMembers;
  policy: PolicyProvider;
  queue: PromptQueue;
  turns: TurnAuthors;
  sessionId: string;
  audit: SessionAudit;
  /** The usage room: each ended turn is booked there (none: nothing is booked). */
  usage: UsageDesk | undefined;
  agent: () => string;
  owner: () => string;
}

/**
 * Where one engine stdout line goes, read from its meta (the line itself is never parsed
 * here): the answer to a client's own control request back to that client alone (a model list cut to
 * the policy's); the
 * policy hook answered by the policy, never shown; a tool prompt a standing rule answers, never
 * shown; any other line into history for every client, raising or withdrawing a prompt on the
 * way, following whose turn runs (`command_lifecycle`, `result`), and moving the state.
 */
export class OutputRouting {
  constructor(private readonly s: OutputParts) {}

  /** One line the engine wrote (its agent seq already accepted); `readAtMs`: when the agent read it. */
  line(line: Uint8Array, meta: LineMeta, readAtMs?: number): void {
    if (meta.type === 'control_response' && meta.request_id !== undefined && this.reply(meta.request_id, line)) return;
    const hook = policyHookCall(meta, line);
    if (hook) return this.s.prompts.answerPolicyHook(hook); // the policy's own: never shown to clients, so none can answer it
    if (meta.type === 'control_request' && meta.request_id) {
      this.s.prompts.raise(meta.request_id, meta.subtype ?? 'unknown', promptRequest(meta, line));
      if (meta.subtype === 'can_use_tool' && this.s.prompts.raisedLive(meta.request_id)) return; // a standing rule answered: members see its decision only
    }
    if (meta.type === 'control_cancel_request' && meta.request_id) this.s.prompts.withdraw(meta.request_id, 'cancelled by the engine');
    // A queued prompt that starts leaves the queue just before the engine says so.
    this.s.queue.follow(meta, this.s.status.current !== 'idle');
    // Whose turn runs (turn-authors.ts); lifecycle lines of the gateway's own uuids stay here, told as `turn` events.
    const lifecycle = meta.type === 'command_lifecycle' ? this.s.turns.lifecycle(line) : undefined;
    if (!lifecycle?.ours) this.s.history.append({ line, origin: 'engine' }, readAtMs);
    this.s.status.follow(meta, this.s.prompts.size > 0);
    if (meta.type === 'result') {
      this.book(line);
      this.s.turns.ended();
    }
    if (lifecycle?.change) this.s.history.append({ event: tetherEvent({ subtype: 'turn', ...lifecycle.change }) });
  }

  /**
   * Books the turn a `result` ends under the principal whose prompt started it, tells its
   * author of each budget it took past a threshold (a `budget` event, audited), then every
   * member what it used (a `usage` event: the last word on the turn).
   */
  private book(line: Uint8Array): void {
    const usage = this.s.usage;
    if (!usage) return;
    const principal = this.s.turns.current[0] ?? UNKNOWN_AUTHOR;
    const sessionId = this.s.sessionId;
    const booked = usage.turnEnded(line, { sessionId, agent: this.s.agent(), principal, owner: this.s.owner() });
    if (!booked) return;
    const { entry: e, notices } = booked;
    for (const { session_id: _, ...n } of notices) {
      this.s.audit.quietly(n.principal, 'budget', {
        state: n.state,
        budget: n.budget,
        share: n.share,
        reason: n.message,
        resets_at: n.resets_at,
      });
      this.s.history.append({ event: tetherEvent({ subtype: 'budget', ...n }) });
    }
    this.s.history.append({
      event: tetherEvent({
        subtype: 'usage',
        principal,
        model: e.model,
        ...figuresOf(e),
        session_cost_usd: usage.ledger.sessionCost(sessionId),
      }),
    });
  }

  /** Sends the engine's answer to the one client that asked, with its own request id back; false when it is not such an answer. */
  private reply(gwId: string, line: Uint8Array): boolean {
    const text = Buffer.from(line.buffer, line.byteOffset, line.byteLength).toString('utf8'); // rare: answers to clients' own requests
    // A model list offers only what the policy lets a set_model name.
    const route = this.s.controls.answer(
      gwId,
      text,
      (clientId) => this.s.members.has(clientId),
      (subtype, reply) => policyModelList(subtype, reply, this.s.policy.current),
    );
    if (route.kind === 'deliver') this.s.members.reply(route.clientId, route.line);
    return route.kind !== 'not-ours';
  }
}
