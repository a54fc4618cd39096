import { TetherError } from '../../../core/errors.js';
import { tetherEvent } from '../../../core/protocol/events.js';
import type { Logger } from '../../../core/logging.js';
import { PromptBook, type PendingPrompt, type PromptObserver } from './prompts.js';
import { outcomeOf } from '../../metrics.js';
import { GATEWAY_KEY, type EngineInputs } from '../engine-inputs.js';
import type { SessionHistory } from '../history/session-history.js';
import type { SessionStatus } from '../session-status.js';
import type { SessionAudit } from '../session-audit.js';
import type { PolicyProvider } from '../../policy/policy-source.js';
import {
  cappedInput,
  decideHook,
  hookAnswer,
  hookAuditDetails,
  POLICY_PRINCIPAL,
  promptTool,
  unauditedDenial,
  type PolicyHookCall,
} from '../../policy/policy-gate.js';
import { checkAnswer, hookAnswerEffects, promptCallOf } from '../../policy/prompt-answers.js';
import { failureCode } from '../../audit/audit-log.js';
import { engineUpdates, type StandingRules } from './standing-rules.js';
import type { TurnAuthors } from './turn-authors.js';
import type { SessionNotice } from '../session-notices.js';
import type { TurnApproval, TurnAttribution } from '../../../core/protocol/turn-approval.js';
import {
  approvalNeeded,
  approvalRefusal,
  approvalText,
  effectiveApproval,
  turnName,
  type ApprovalNeed,
} from '../../../core/policy/turn-approval.js';

/** The audit principal of an answer a standing rule gave (the record names the rule and its grantor). */
const RULE_PRINCIPAL = 'tether:rule';

/** `granted_for` of a rule the owner granted: every member's turns. */
const GRANTED_FOR_EVERYONE = '*';

/** Engine control requests a client answers through the prompt book. */
const DENY_ON_EXPIRY = 'can_use_tool';

/** A permission answer with its `updatedPermissions` replaced. */
function withUpdates(line: Record<string, unknown>, updates: unknown[]): Record<string, unknown> {
  const response = line.response as Record<string, unknown>;
  const body = (response.response ?? {}) as Record<string, unknown>;
  return { ...line, response: { ...response, response: { ...body, updatedPermissions: updates } } };
}

/** What the prompts of one session work with: the session's other parts. */
export interface PromptParts {
  sessionId: string;
  maxPending: number;
  expiryMs: number;
  history: SessionHistory;
  inputs: EngineInputs;
  status: SessionStatus;
  audit: SessionAudit;
  logger: Logger;
  policy: PolicyProvider;
  /** The session's folder as its options name it (undefined: the agent's default, unknown here). */
  cwd?: string;
  /** The session rules members granted, kept per person (the engine never gets them). */
  standing: StandingRules;
  /** Whose turn the engine runs. */
  turns: TurnAuthors;
  owner: string;
  agent: string;
  /** The session's own turnApproval, asked for at create (held to the policy's there). */
  turnApproval: TurnApproval | undefined;
  /** Told of prompts people must answer and of their settling (session-notices.ts). */
  notify: (notice: SessionNotice) => void;
}

/** The tool whose answer is a person's input by design: whoever is asked answers it, whatever the turn. */
const INTERACTIVE_TOOL = 'AskUserQuestion';

/** Who acts: an attached client, by principal and client id. */
export interface Actor {
  principal: string;
  clientId: string;
}

/**
 * The life of one session's prompts: requests the engine makes to the host (can_use_tool,
 * hook_callback, …) raised for clients, answered by the first client (audited before it is
 * forwarded), withdrawn when the engine cancels them, denied by the gateway itself when they
 * expire or overflow, and the policy hook answered from the central policy, never by a client.
 */
export class SessionPrompts {
  private readonly book: PromptBook;

  constructor(private readonly s: PromptParts) {
    this.book = new PromptBook(s.maxPending);
  }

  get size(): number {
    return this.book.size;
  }

  /** Told about prompts raised and settled from now on (set after a restore: restored prompts were counted by the process that raised them). */
  set observer(o: PromptObserver | undefined) {
    this.book.observer = o;
  }

  /**
   * The engine asks (`request`: the body of its control request, when known): the prompt waits
   * for a client, or is denied at once when too many wait.
   */
  raise(requestId: string, subtype: string, request?: Record<string, unknown>): void {
    const tool = promptTool(request);
    if (this.book.full) {
      this.s.logger.warn({ sessionId: this.s.sessionId, requestId }, 'too many pending prompts; denying');
      this.book.observer?.promptRaised();
      this.book.observer?.promptSettled('overflow', 0);
      this.s.audit.quietly('tether:overflow', 'permission_decision', {
        request_id: requestId,
        ...tool,
        behavior: 'deny',
        reason: 'too many pending prompts',
      });
      this.answerEngine(requestId, subtype, `Denied by Tether: more than ${this.s.maxPending} requests pending`);
      return;
    }
    const timer = setTimeout(() => this.expire(requestId), this.s.expiryMs);
    timer.unref();
    const call = promptCallOf(request);
    const turnAuthors = subtype === DENY_ON_EXPIRY ? [...this.s.turns.current] : undefined;
    this.book.raise({ requestId, subtype, raisedAt: Date.now(), timer, tool, call, turnAuthors });
  }

  /**
   * A tool prompt the engine just raised, before members see it: answered at once by a standing
   * rule that covers it for its turn (then members never see the prompt, only its decision; true),
   * or announced with whose turn it comes from and who may answer (`prompt_turn`; false).
   */
  raisedLive(requestId: string): boolean {
    if (this.answerByRule(requestId)) return true;
    const p = this.book.get(requestId);
    const attribution = p?.turnAuthors ? this.attribution(p.turnAuthors, p.call?.interactive) : undefined;
    if (attribution)
      this.s.history.append({
        event: tetherEvent({ subtype: 'prompt_turn', request_id: requestId, tool: p?.call?.tool, ...attribution }),
      });
    if (p?.call)
      this.s.notify({
        kind: 'prompt',
        requestId,
        tool: p.call.tool,
        interactive: p.call.interactive,
        ...(attribution?.approval ? { mayAnswer: attribution.approval.may_answer } : {}),
      });
    return false;
  }

  /** The setting in force and the approval a call of a turn by `authors` needs (undefined: any controller). */
  private approval(authors: readonly string[]): { setting: TurnApproval; need: ApprovalNeed | undefined } {
    const policy = this.s.policy.current;
    const setting = effectiveApproval(policy.turnApprovalFor(this.s.agent).setting, this.s.turnApproval, policy.groups);
    return { setting, need: approvalNeeded(setting, { owner: this.s.owner, authors }) };
  }

  /** Whose turn a call comes from and who may answer it, as members and the audit see it. */
  private attribution(authors: readonly string[], interactive = false): TurnAttribution {
    const need = interactive ? undefined : this.approval(authors).need;
    return { turn_authors: [...authors], ...(need ? { approval: { needs: need.kind, may_answer: need.mayAnswer } } : {}) };
  }

  /**
   * Refuses (PERMISSION_DENIED, recorded) an answer to a tool prompt from someone the turn's
   * approval setting does not let answer it: the call's own author, or a controller who is not
   * the owner or an approver. The prompt stays open for those who may.
   */
  private checkApprover(by: Actor, prompt: PendingPrompt | undefined, details: Record<string, unknown>): void {
    if (prompt?.subtype !== DENY_ON_EXPIRY || !prompt.turnAuthors || prompt.call?.interactive) return;
    const { setting, need } = this.approval(prompt.turnAuthors);
    if (!need) return;
    const why = approvalRefusal(
      need,
      setting,
      by.principal,
      { owner: this.s.owner, authors: prompt.turnAuthors },
      this.s.policy.current.groups,
    );
    if (why === undefined) return;
    this.s.audit.quietly(by.principal, 'permission_decision', {
      ...details,
      result: 'refused',
      code: 'PERMISSION_DENIED',
      reason: why,
      decided_by: POLICY_PRINCIPAL,
      turn_approval: approvalText(setting),
    });
    throw new TetherError('PERMISSION_DENIED', why, { may_answer: need.mayAnswer });
  }

  /**
   * The prompts waiting that `principal` (a member who may control) may answer, oldest first:
   * tool calls the turn's approval lets them answer (as checkApprover judges), questions to a
   * person (AskUserQuestion, elicitation). The client's own hook callbacks are not a person's to answer.
   */
  answerableBy(principal: string): { requestId: string; kind: 'permission' | 'question'; tool?: string; at: string }[] {
    const out: { requestId: string; kind: 'permission' | 'question'; tool?: string; at: string }[] = [];
    for (const id of this.book.ids()) {
      const p = this.book.get(id);
      if (!p) continue;
      const at = new Date(p.raisedAt).toISOString();
      if (p.subtype === 'elicitation') out.push({ requestId: id, kind: 'question', at });
      if (p.subtype !== DENY_ON_EXPIRY) continue;
      const tool = typeof p.tool?.tool === 'string' ? p.tool.tool : undefined;
      if (p.call?.interactive) {
        out.push({ requestId: id, kind: 'question', tool, at });
        continue;
      }
      if (p.turnAuthors) {
        const { setting, need } = this.approval(p.turnAuthors);
        const turn = { owner: this.s.owner, authors: p.turnAuthors };
        if (need && approvalRefusal(need, setting, principal, turn, this.s.policy.current.groups) !== undefined) continue;
      }
      out.push({ requestId: id, kind: 'permission', ...(tool === undefined ? {} : { tool }), at });
    }
    return out;
  }

  /** The engine withdrew its request (or a restored history says it did). */
  withdraw(requestId: string, why: string): void {
    if (this.book.withdraw(requestId, why)) this.s.notify({ kind: 'prompt_settled', requestId, how: why });
  }

  /** The engine is gone: every pending prompt is withdrawn, and clients are told. */
  clear(why: string): void {
    for (const p of this.book.clear(why)) {
      this.announceWithdrawal(p.requestId);
      this.s.notify({ kind: 'prompt_settled', requestId: p.requestId, how: why });
    }
  }

  /**
   * A client's control_response (`line`, with the input's dedupe `key`): the first valid answer
   * wins; it is recorded before it is forwarded, so a decision that cannot be audited is not applied.
   */
  answer(by: Actor, line: Record<string, unknown>, key: string): void {
    const response = line.response as { request_id?: unknown; subtype?: unknown } | undefined;
    if (typeof response !== 'object' || response === null || typeof response.request_id !== 'string') {
      throw new TetherError('INVALID_ARGUMENT', 'control_response needs response.request_id naming the pending request');
    }
    if (response.subtype !== 'success' && response.subtype !== 'error') {
      throw new TetherError('INVALID_ARGUMENT', 'control_response.response.subtype must be "success" or "error"');
    }
    const requestId = response.request_id;
    if (!this.book.has(requestId)) this.book.claim(requestId, by.principal); // throws the precise error
    const answer = (line.response as { response?: { behavior?: unknown; updatedPermissions?: unknown } }).response;
    const behavior = response.subtype === 'error' ? 'error' : String(answer?.behavior ?? 'answered');
    const prompt = this.book.get(requestId);
    const details: Record<string, unknown> = {
      request_id: requestId,
      ...prompt?.tool,
      behavior,
      client_id: by.clientId,
      ...(prompt?.turnAuthors ? { turn_authors: prompt.turnAuthors } : {}),
    };
    this.checkApprover(by, prompt, details);
    if (response.subtype === 'success') {
      const body = ((line.response as { response?: unknown }).response ?? {}) as Record<string, unknown>;
      if (prompt?.subtype === 'can_use_tool') Object.assign(details, this.checkedAnswer(by, details, body));
      // A client's own hook may change the call as a permission answer may: checked the same way.
      if (prompt?.subtype === 'hook_callback')
        for (const effect of hookAnswerEffects(body)) Object.assign(details, this.checkedAnswer(by, details, effect));
    }
    // Session allow rules stay here, per person (standing-rules.ts): the engine's would hold for everyone's turns.
    const updates =
      behavior === 'allow' && prompt?.subtype === DENY_ON_EXPIRY && Array.isArray(answer?.updatedPermissions)
        ? answer.updatedPermissions
        : undefined;
    const sent = updates ? withUpdates(line, engineUpdates(updates)) : line;
    const forEveryone = by.principal === this.s.owner;
    this.s.audit.audited(by.principal, 'permission_decision', details, () => {
      this.book.claim(requestId, by.principal, outcomeOf(behavior));
      this.s.inputs.toEngine(sent, key);
    });
    if (updates) this.s.standing.granting(by.principal, updates, forEveryone);
    this.decided(
      requestId,
      by.principal,
      behavior,
      updates ? { updated_permissions: updates, granted_for: forEveryone ? GRANTED_FOR_EVERYONE : by.principal } : {},
    );
  }

  /**
   * A person's plain allow or deny of a tool prompt, outside any attachment (a notification's
   * action): the call's own input allowed as asked, through {@link answer} (first answer wins,
   * the approval check, the audit). Throws like answer(); INVALID_ARGUMENT for a prompt that
   * is not a tool's permission (a question needs its answers: open the session).
   */
  answerPlain(by: Actor, requestId: string, behavior: 'allow' | 'deny', key: string): void {
    const p = this.book.get(requestId);
    if (p && (p.subtype !== DENY_ON_EXPIRY || !p.call || p.call.interactive))
      throw new TetherError(
        'INVALID_ARGUMENT',
        'only a tool permission can be answered with allow or deny; open the session to answer this',
      );
    const body =
      behavior === 'allow'
        ? { behavior, updatedInput: p?.call?.input ?? {} }
        : { behavior, message: `Denied by ${by.principal} from a notification` };
    this.answer(by, { type: 'control_response', response: { subtype: 'success', request_id: requestId, response: body } }, key);
  }

  /**
   * A tool prompt a standing rule covers for its turn (standing-rules.ts) is answered by the
   * gateway, allowed as the rule's grantor allowed it. The grantor must be someone who may
   * approve calls of that turn (turnApproval). False: people decide.
   */
  private answerByRule(requestId: string): boolean {
    const p = this.book.get(requestId);
    if (p?.subtype !== DENY_ON_EXPIRY || !p.call || p.call.interactive || !p.turnAuthors) return false;
    const authors = p.turnAuthors;
    const { setting, need } = this.approval(authors);
    const groups = this.s.policy.current.groups;
    const mayApprove = (grantor: string) =>
      !need || approvalRefusal(need, setting, grantor, { owner: this.s.owner, authors }, groups) === undefined;
    const rule = this.s.standing.allowing({ tool: p.call.tool, input: p.call.input, cwd: this.s.cwd ?? '/' }, authors, mayApprove);
    if (!rule) return false;
    const line = {
      type: 'control_response',
      response: { subtype: 'success', request_id: requestId, response: { behavior: 'allow', updatedInput: p.call.input } },
    };
    try {
      this.s.audit.audited(
        RULE_PRINCIPAL,
        'permission_decision',
        { request_id: requestId, ...p.tool, behavior: 'allow', turn_authors: authors, rule: rule.label, granted_by: rule.grantedBy },
        () => {
          this.book.claim(requestId, RULE_PRINCIPAL, 'answered');
          this.s.inputs.toEngine(line, GATEWAY_KEY);
        },
      );
    } catch (err) {
      this.s.logger.warn(
        { sessionId: this.s.sessionId, err: String(err) },
        'a standing rule could not answer; the prompt waits for people',
      );
      return false;
    }
    this.decided(requestId, rule.grantedBy, 'allow', { rule: rule.label }, false);
    return true;
  }

  /**
   * Checks a person's answer to a can_use_tool prompt, or what a hook callback's answer changes
   * (gateway/policy/prompt-answers.ts), before it is claimed, so a refused answer leaves the prompt
   * open for another; the refusal is recorded.
   * Returns what the audit record adds: the input that runs and the permissions kept.
   */
  private checkedAnswer(by: Actor, details: Record<string, unknown>, answer: Record<string, unknown>): Record<string, unknown> {
    const call = this.book.get(details.request_id as string)?.call;
    try {
      if (!call) {
        if (answer.updatedPermissions !== undefined || (answer.updatedInput !== undefined && answer.behavior === 'allow')) {
          throw new TetherError(
            'FAILED_PRECONDITION',
            'the tool call this prompt asks about is not known here, so an answer may not change its input or permissions; allow or deny it as asked',
          );
        }
        return {};
      }
      const effects = checkAnswer(this.s.policy.current, call, answer, this.s.cwd);
      const out: Record<string, unknown> = {};
      if (effects.input) out.input = cappedInput(effects.input); // what actually runs
      if (effects.inputChanged) out.asked_input = cappedInput(call.input);
      if (effects.updatedPermissions) out.updated_permissions = effects.updatedPermissions;
      return out;
    } catch (err) {
      this.s.audit.quietly(by.principal, 'permission_decision', {
        ...details,
        updated_input: cappedInput(answer.updatedInput),
        updated_permissions: answer.updatedPermissions,
        result: 'refused',
        code: failureCode(err),
        reason: (err as Error).message,
        decided_by: POLICY_PRINCIPAL,
      });
      throw err;
    }
  }

  /**
   * Answers the policy hook from the policy in force: recorded first (a decision that cannot
   * be recorded becomes a deny), then shown to clients when a rule decided, then sent.
   */
  answerPolicyHook(call: PolicyHookCall): void {
    const authors = [...this.s.turns.current];
    let d = decideHook(this.s.policy.current, call);
    let reason: string | undefined;
    // A call in someone else's turn that needs another's approval asks, whatever the engine's own
    // allow rules (its session rules, settings, --allowedTools) would let through: an `ask` from the
    // hook makes the engine prompt even for a pre-approved tool (docs/engine-protocol.md, section 8).
    if (d.decision === 'none' && call.event === 'PreToolUse' && call.tool !== INTERACTIVE_TOOL) {
      const { setting, need } = this.approval(authors);
      if (need) {
        d = { decision: 'ask', rule: `turnApproval = ${approvalText(setting)}` };
        reason = `Tether: this call comes from ${turnName(authors)}; it needs ${need.kind === 'owner' ? "the owner's approval" : `the approval of ${need.mayAnswer.join(' or ')}`}`;
      }
    }
    let answer = hookAnswer(call.requestId, d, reason);
    try {
      this.s.audit.record(POLICY_PRINCIPAL, 'policy_decision', { ...hookAuditDetails(call, d), turn_authors: authors });
      if (d.decision !== 'none' && d.rule) {
        this.s.history.append({
          event: tetherEvent({
            subtype: 'policy_decision',
            tool_use_id: call.toolUseId,
            tool: call.tool,
            decision: d.decision,
            rule: d.rule,
            turn_authors: authors,
          }),
        });
      }
    } catch (err) {
      answer = hookAnswer(call.requestId, { decision: 'deny' }, unauditedDenial(err));
    }
    try {
      this.s.inputs.toEngine(answer, GATEWAY_KEY);
    } catch (err) {
      // Unanswered, the hook times out and its onFailure "block" keeps the tool from running.
      this.s.logger.error({ sessionId: this.s.sessionId, err: String(err) }, 'policy answer not queued for the engine');
    }
  }

  private expire(requestId: string): void {
    const p = this.book.withdraw(requestId, 'expired', 'expired');
    if (!p) return;
    this.s.audit.quietly('tether:expiry', 'permission_decision', {
      request_id: requestId,
      ...p.tool,
      behavior: 'deny',
      reason: 'expired',
      ...(p.turnAuthors ? { turn_authors: p.turnAuthors } : {}),
    }); // denying goes ahead anyway
    this.answerEngine(requestId, p.subtype, `Permission request expired after ${Math.round(this.s.expiryMs / 1000)} s with no answer`);
    this.decided(requestId, 'tether:expiry', 'deny');
  }

  /** Tells clients a prompt is settled: withdrawn from their screens (`shown`: it reached them), who decided and how. */
  private decided(
    requestId: string,
    decidedBy: string,
    behavior: string,
    extra: { updated_permissions?: unknown[]; granted_for?: string; rule?: string } = {},
    shown = true,
  ): void {
    if (shown) this.announceWithdrawal(requestId);
    this.s.notify({ kind: 'prompt_settled', requestId, how: `${behavior} by ${decidedBy}` });
    this.s.history.append({
      event: tetherEvent({ subtype: 'prompt_decided', request_id: requestId, decided_by: decidedBy, behavior, ...extra }),
    });
    if (this.book.size === 0 && this.s.status.current === 'requires_action') this.s.status.set('running');
  }

  private announceWithdrawal(requestId: string): void {
    this.s.history.append({ gatewayLine: { type: 'control_cancel_request', request_id: requestId } });
  }

  /** Fail-closed answer from the gateway itself: deny for permission prompts, error otherwise. */
  private answerEngine(requestId: string, subtype: string, message: string): void {
    const response =
      subtype === DENY_ON_EXPIRY
        ? { subtype: 'success', request_id: requestId, response: { behavior: 'deny', message } }
        : { subtype: 'error', request_id: requestId, error: message };
    this.s.inputs.toEngine({ type: 'control_response', response }, GATEWAY_KEY);
  }
}
