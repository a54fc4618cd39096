import { TetherError } from '../../core/errors.js';
import type { SessionTitleKeeper } from './session-title.js';
import { PromptPriority, tetherEvent } from '../../core/protocol/events.js';
import { ENGINE_DEFAULT_PRIORITY } from '../../core/protocol/prompt-priority.js';
import { checkEngineInput } from '../../core/protocol/engine-input.js';
import { checkUserMessage, promptChars } from './session-lines.js';
import { checkMentions, POLICY_PRINCIPAL } from '../policy/policy-gate.js';
import { failureCode } from '../audit/audit-log.js';
import type { PolicyProvider } from '../policy/policy-source.js';
import type { ControlRouting } from './control-routing.js';
import type { EngineInputs } from './engine-inputs.js';
import type { SessionHistory } from './history/session-history.js';
import type { SessionStatus } from './session-status.js';
import type { SessionAudit } from './session-audit.js';
import type { Actor, SessionPrompts } from './turns/session-prompts.js';
import type { PromptQueue } from './turns/prompt-queue.js';
import { stampUserMessage, type TurnAuthors } from './turns/turn-authors.js';
import type { UsageDesk } from '../usage/usage-desk.js';

/** What input routing works with: the session's other parts. */
export interface RoutingParts {
  sessionId: string;
  history: SessionHistory;
  inputs: EngineInputs;
  status: SessionStatus;
  audit: SessionAudit;
  controls: ControlRouting;
  prompts: SessionPrompts;
  /** Prompts sent while a turn runs, waiting for theirs. */
  queue: PromptQueue;
  /** The central policy: its read rules judge a prompt's @-mentions. */
  policy: PolicyProvider;
  /** The session's working folder as the client named it (undefined: the agent's default). */
  cwd: string | undefined;
  /** Who sent each prompt, by its uuid: the turn's authors. */
  turns: TurnAuthors;
  /** The session's title: its first prompt titles it. */
  titles: SessionTitleKeeper;
  /**
   * Whether prompts are stamped (stampUserMessage): not when the client brings the engine's
   * initialize (the SDK drop-in speaks for itself, and its app must see what a local CLI would
   * write: the engine echoes an origin, and adds fields for a uuid, on the turn's result). Its
   * prompts without a uuid then have no known author (approval fails closed).
   */
  stamp: boolean;
  /** The usage room: the policy's budgets admit or refuse each prompt (none: no budgets). */
  usage: UsageDesk | undefined;
  /** The agent the session runs on now (a move changes it). */
  agent: () => string;
}

/** While the session is in one of these, a turn runs: a prompt sent now waits in the queue. */
const TURN_STATES: ReadonlySet<string> = new Set(['running', 'requires_action', 'unresponsive']);

/**
 * One session's client input, from a client allowed to send it to the engine: checked (size,
 * depth, shape), applied at most once per (principal, input id), and routed by type: a prompt
 * (audited, shown to every client, queued), the client's own control request (under a gateway
 * request id), its cancel, an answer to a prompt, or a keep-alive. Values only: the line is
 * encoded at the edges (the agent link for the engine, session history for clients).
 */
export class InputRouting {
  constructor(private readonly s: RoutingParts) {}

  /**
   * Applies one input line, at most once per input id; `ended`: the session can take none.
   * Throws a typed error (and changes nothing) when it is malformed or cannot be queued.
   * `onApplied` gets the line as serialized (once, here) when it was applied.
   */
  input(
    from: Actor,
    inputId: string,
    given: Record<string, unknown>,
    ended: boolean,
    onApplied?: (text: string) => void,
  ): 'applied' | 'duplicate' {
    // Every prompt carries a uuid and an origin, so its turn has an author (turn-authors.ts).
    const line = given.type === 'user' && this.s.stamp ? stampUserMessage(given) : given;
    // Size, depth and shape first: nothing of a line the engine cannot take is kept or broadcast.
    const text = checkEngineInput(line);
    const key = `${from.principal}\u0000${inputId}`; // survives the client reconnecting with a new client id
    if (this.s.inputs.seen(key)) return 'duplicate';
    if (ended) throw new TetherError('FAILED_PRECONDITION', `session ${this.s.sessionId} has ended`);
    if (line.type !== 'keep_alive') this.s.inputs.assertRoom(text.length);
    this.route(from, line, key, inputId, text, line.uuid !== given.uuid);
    this.s.inputs.remember(key); // keep_alive stores nothing, yet a retry of it is a duplicate too
    onApplied?.(text);
    return 'applied';
  }

  /** `key`: the client's dedupe key, stored with what the line sends to the engine; `text`: the line serialized; `stamped`: the gateway made the prompt's uuid. */
  private route(from: Actor, line: Record<string, unknown>, key: string, inputId: string, text: string, stamped: boolean): void {
    switch (line.type) {
      case 'user':
        return this.prompt(from, line, key, inputId, text, stamped);
      case 'control_request':
        return this.forwardControlRequest(from, line, key);
      case 'control_response':
        return this.s.prompts.answer(from, line, key);
      case 'control_cancel_request':
        return this.s.inputs.toEngine({ ...line, request_id: this.s.controls.idOf(from.clientId, line.request_id) }, key);
      case 'keep_alive':
        return;
      default:
        throw new TetherError(
          'INVALID_ARGUMENT',
          `unsupported input type ${JSON.stringify(line.type)} (expected user, control_request, control_response, control_cancel_request or keep_alive)`,
        );
    }
  }

  /**
   * A prompt: stored and queued for the engine first, then echoed to every client with the
   * sender's input id, so the echo is a true receipt (the answer to a `session.post`).
   */
  private prompt(from: Actor, line: Record<string, unknown>, key: string, inputId: string, text: string, stamped: boolean): void {
    checkUserMessage(line);
    const queued = this.queuing(line);
    const details = { client_id: from.clientId, uuid: line.uuid, chars: promptChars(line), ...(queued ? { priority: line.priority } : {}) };
    try {
      checkMentions(this.s.policy.current, line, this.s.cwd);
      // A turn over budget never starts: refused here, before the engine sees the prompt.
      this.s.usage?.admit({ principal: from.principal, agent: this.s.agent(), sessionId: this.s.sessionId });
    } catch (err) {
      this.s.audit.quietly(from.principal, 'prompt', {
        ...details,
        result: 'refused',
        code: failureCode(err),
        reason: (err as Error).message,
        decided_by: POLICY_PRINCIPAL,
      });
      throw err;
    }
    if (typeof line.uuid === 'string') this.s.turns.sent(line.uuid, from.principal, stamped);
    this.s.audit.audited(from.principal, 'prompt', details, () => {
      const uuid = typeof line.uuid === 'string' ? line.uuid : undefined;
      const priority = line.priority as PromptPriority | undefined;
      this.s.inputs.toEngine(line, key, text);
      this.s.titles.prompted(line.message);
      this.s.history.append({
        event: tetherEvent({
          subtype: 'prompt',
          principal: from.principal,
          client_id: from.clientId,
          message: line.message,
          input_id: inputId,
          uuid,
          ...(queued ? { queued, priority } : {}),
        }),
      });
      if (queued)
        this.s.queue.add({
          uuid: uuid!,
          principal: from.principal,
          client_id: from.clientId,
          priority: priority ?? ENGINE_DEFAULT_PRIORITY,
          message: line.message,
        });
      if (this.s.status.current === 'idle') this.s.status.set('running');
    });
  }

  /**
   * Whether the prompt waits in the queue: sent while a turn runs, with a `uuid` (the engine's
   * handle on it, for its start and a withdrawal). The line goes to the engine as sent, never
   * rewritten (a raw stream-json client gets a bare CLI's behaviour); Tether's own clients
   * send a uuid and `later` unless their sender steers. Checked before anything is kept.
   */
  private queuing(line: Record<string, unknown>): boolean {
    if (line.priority !== undefined && !PromptPriority.safeParse(line.priority).success) {
      throw new TetherError(
        'INVALID_ARGUMENT',
        `priority must be one of ${PromptPriority.options.join(', ')} (got ${JSON.stringify(line.priority)})`,
      );
    }
    const queued = TURN_STATES.has(this.s.status.current) && this.s.queue.tracking && typeof line.uuid === 'string' && line.uuid !== '';
    if (queued) this.s.queue.assertRoom(line.uuid as string);
    return queued;
  }

  private forwardControlRequest(from: Actor, line: Record<string, unknown>, key: string): void {
    const request = line.request;
    if (typeof request !== 'object' || request === null || typeof (request as { subtype?: unknown }).subtype !== 'string') {
      throw new TetherError('INVALID_ARGUMENT', 'control_request needs a request object with a string subtype');
    }
    const req = request as Record<string, unknown>;
    this.s.audit.audited(
      from.principal,
      'control',
      { client_id: from.clientId, subtype: req.subtype, model: req.model, mode: req.mode },
      () => {
        const gwId = this.s.controls.open(from.clientId, from.principal, line.request_id, req.subtype as string);
        try {
          this.s.inputs.toEngine({ ...line, request_id: gwId }, key);
        } catch (err) {
          this.s.controls.forget(gwId); // refused before it reached the engine: no answer will come
          throw err;
        }
        // A stop that cancels the queue says so: the engine drops every queued prompt with it.
        const cleared = req.subtype === 'interrupt' && req.cancel_queued === true ? this.s.queue.clear(from.principal) : undefined;
        if (req.subtype === 'interrupt')
          this.s.history.append({
            event: tetherEvent({
              subtype: 'interrupt',
              principal: from.principal,
              client_id: from.clientId,
              ...(cleared === undefined ? {} : { cleared }),
            }),
          });
      },
    );
  }
}
