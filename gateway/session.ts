import { TetherError } from '../core/errors.js';
import { tetherEvent, type Role, type SessionState, type TetherEvent } from '../core/protocol/events.js';
import type { LineMeta, SessionInfo, StopSignal } from '../core/protocol/methods.js';
import type { EngineKind, SessionOptions } from '../core/protocol/session-options.js';
import type { Logger } from '../core/logging.js';
import { PromptBook } from './prompts.js';
import { ReplayLog, type ReplayLogLimits } from './replay-log.js';
import { DurableOutbox } from './durable-outbox.js';
import { failureCode, recordOrRefuse, recordQuietly, type AuditEntry, type AuditLog } from './audit-log.js';
import { outcomeOf, type GatewayMetrics } from './metrics.js';
import type { SessionStore, StoredSession } from './session-store.js';
import { ControlRouting } from './control-routing.js';
import { checkUserMessage, promptChars } from './session-lines.js';
import { encodeEventFrame, encodeLineFrame } from '../core/protocol/session-frame.js';
import { SessionRoles, type RoleDecision } from './session-roles.js';
import { checkEngineInput } from '../core/protocol/engine-input.js';
import { PendingInputs } from './pending-inputs.js';
import { StaticPolicy, type PolicyProvider } from './policy-source.js';
import { decideHook, hookAnswer, hookAuditDetails, policyHookCall, POLICY_PRINCIPAL, promptTool, unauditedDenial, type PolicyHookCall } from './policy-gate.js';

/** One attached client as the session sees it: transport-blind. */
export interface Member {
  readonly clientId: string;
  readonly principal: string;
  readonly transport: string;
  /**
   * Queues one session.frame notification for this client: the same bytes (UTF-8 JSON) go to
   * every member, so the client edge must not modify them. `readAtMs`: when the agent read the
   * engine line it carries (live engine frames only, for the relay latency).
   */
  sendFrame(frame: Buffer, readAtMs?: number): void;
  /** Delivers the engine's answer to this client's own control request. */
  sendReply(sessionId: string, line: string): void;
}

/** The engine side of a session as the gateway sees it (the agent link). */
export interface EngineHost {
  input(sessionId: string, seq: number, line: Record<string, unknown>): void;
  stop(sessionId: string, reason: string, signal?: StopSignal): Promise<void>;
}

export interface SessionLimits {
  replay: ReplayLogLimits;
  /** A control request the engine leaves unanswered this long marks the session unresponsive. */
  controlAnswerMs: number;
  maxPendingPrompts: number;
  promptExpiryMs: number;
  maxMembers: number;
}

export interface SessionInit {
  id: string;
  agent: string;
  engine: EngineKind;
  owner: string;
  options: SessionOptions;
  host: EngineHost | undefined;
  limits: SessionLimits;
  logger: Logger;
  audit: AuditLog;
  store: SessionStore;
  /** History read back from the store after a restart. */
  restored?: StoredSession;
  /** What the session reports to the gateway's metrics (prompts, replay gaps); none by default. */
  metrics?: SessionMetrics;
  /** The central policy that answers the engine's policy hook (default: no rules). */
  policy?: PolicyProvider;
}

/** The part of the gateway's metrics a session reports to. */
export type SessionMetrics = Pick<GatewayMetrics, 'promptRaised' | 'promptSettled' | 'replayGap' | 'engineUnresponsive'>;

interface Attachment {
  member: Member;
  role: Role;
  since: string;
}



/** The dedupe key stored with lines the gateway itself sends the engine (no client's input). */
const GATEWAY_KEY = '';

/** Engine control requests a client answers through the prompt book. */
const DENY_ON_EXPIRY = 'can_use_tool';

/**
 * One live engine session: its ordered history, who is attached with which role, pending
 * prompts and the mapping of client request ids. Knows nothing of sockets or processes.
 */
export class Session {
  readonly createdAt = new Date().toISOString();
  private state: SessionState = 'starting';
  private readonly history: ReplayLog;
  /** Frames on their way to members, released once the store holds them. */
  private readonly outbox: DurableOutbox;
  private readonly members = new Map<string, Attachment>();
  private readonly prompts: PromptBook;
  /** Gateway request id → the client that sent it and its own id. */
  /** Clients' control requests in flight to the engine, kept apart per client, each timed. */
  private readonly controls: ControlRouting;
  /** The state to go back to once an unresponsive engine answers again. */
  private answeringState: SessionState = 'idle';
  private inputSeq = 0;
  /** Inputs handed to the agent link but not yet confirmed written to the engine. */
  private readonly pendingInputs = new PendingInputs();
  private lastAgentSeq = 0;
  private readonly recentInputs = new Map<string, true>();
  /** The stop in flight toward the agent, shared by everyone who asks meanwhile. */
  private stopping: Promise<void> | undefined;
  /** Called once when the session ends (the directory schedules its removal). */
  onEnded: (() => void) | undefined;

  readonly id: string;
  readonly agent: string;
  readonly engine: EngineKind;
  readonly owner: string;
  readonly options: SessionOptions;
  private host: EngineHost | undefined;
  private readonly limits: SessionLimits;
  private readonly logger: Logger;
  private readonly audit: AuditLog;
  private readonly store: SessionStore;
  private readonly metrics: SessionMetrics | undefined;
  private readonly policy: PolicyProvider;
  /** Who gets which role: token scope, owner and the owner's decisions (kept in the store). */
  readonly roles: SessionRoles;

  constructor(init: SessionInit) {
    this.id = init.id;
    this.agent = init.agent;
    this.engine = init.engine;
    this.owner = init.owner;
    this.options = init.options;
    this.host = init.host;
    this.limits = init.limits;
    this.logger = init.logger;
    this.audit = init.audit;
    this.store = init.store;
    this.policy = init.policy ?? new StaticPolicy();
    this.history = new ReplayLog(init.limits.replay);
    this.controls = new ControlRouting({
      answerWithinMs: init.limits.controlAnswerMs,
      onOverdue: (subtype, waitedMs) => this.onControlOverdue(subtype, waitedMs),
      onCaughtUp: () => this.state === 'unresponsive' && this.setState(this.answeringState, true),
    });
    this.prompts = new PromptBook(init.limits.maxPendingPrompts);
    this.roles = new SessionRoles(init.owner, init.restored?.roles, (decisions) => this.store.saveRoles(this.id, decisions));
    if (init.restored) this.restore(init.restored);
    else this.store.create({ id: this.id, agent: this.agent, engine: this.engine, owner: this.owner, options: this.options, created_at: this.createdAt });
    // Restored history is durable already; everything after goes out once the store holds it.
    this.outbox = new DurableOutbox(this.store, (bytes, readAtMs) => {
      for (const a of this.members.values()) a.member.sendFrame(bytes, readAtMs);
    }, this.history.lastSeq);
    this.metrics = init.metrics;
    this.prompts.observer = init.metrics; // after the restore: restored prompts were counted by the process that raised them
  }

  /**
   * Rebuilds history, state, pending prompts and input bookkeeping from the store. The
   * session then waits for its agent ('agent-lost') unless it had ended.
   */
  private restore(stored: StoredSession): void {
    (this as { createdAt: string }).createdAt = stored.record.created_at;
    if (stored.frames.length && stored.frames[0].seq > 1) this.history.resumeAt(stored.frames[0].seq); // the store was compacted
    for (const f of stored.frames) {
      this.history.append({ seq: f.seq, bytes: f.bytes });
      if (f.agentSeq !== undefined && f.agentSeq > this.lastAgentSeq) this.lastAgentSeq = f.agentSeq;
      this.replayState(f.bytes);
    }
    for (const i of stored.inputs) {
      this.inputSeq = Math.max(this.inputSeq, i.seq);
      if (i.key !== GATEWAY_KEY) this.recentInputs.set(i.key, true);
      let bytes: number;
      try {
        bytes = checkEngineInput(i.line).length; // a store written by an older gateway may hold what we now refuse
      } catch (err) {
        this.logger.warn({ sessionId: this.id, seq: i.seq, err: (err as Error).message }, 'dropping a stored input the engine cannot take');
        continue;
      }
      this.pendingInputs.push({ seq: i.seq, line: i.line, bytes });
    }
    if (this.state !== 'ended') this.state = 'agent-lost';
  }

  private replayState(frame: Buffer): void {
    let params: { message?: { type?: string; request_id?: string; request?: { subtype?: string } }; event?: TetherEvent; origin?: string };
    try {
      params = (JSON.parse(frame.toString('utf8')) as { params: typeof params }).params;
    } catch {
      return;
    }
    if (params.event?.subtype === 'state') this.state = params.event.state;
    if (params.event?.subtype === 'exited') this.state = 'ended';
    const v = params.message;
    if (typeof v !== 'object' || v === null) return;
    if (v.type === 'control_request' && params.origin === 'engine' && typeof v.request_id === 'string') this.raisePrompt(v.request_id, v.request?.subtype ?? 'unknown');
    if (v.type === 'control_cancel_request' && typeof v.request_id === 'string') this.prompts.withdraw(v.request_id, 'withdrawn');
  }

  get currentState(): SessionState {
    return this.state;
  }

  get ended(): boolean {
    return this.state === 'ended';
  }

  /** The next output seq the gateway expects from the agent (for agent resume). */
  get nextAgentSeq(): number {
    return this.lastAgentSeq + 1;
  }

  info(): SessionInfo {
    return {
      id: this.id,
      agent: this.agent,
      engine: this.engine,
      owner: this.owner,
      state: this.state,
      created_at: this.createdAt,
      clients: [...this.members.values()].map((a) => ({
        client_id: a.member.clientId,
        principal: a.member.principal,
        role: a.role,
        transport: a.member.transport,
        since: a.since,
      })),
      pending_prompts: this.prompts.size,
      last_seq: this.history.lastSeq,
      options: this.options,
    };
  }

  // ---- engine side ---------------------------------------------------------------------

  /** The agent (re)bound this session; `host` undefined means the agent link is down. */
  bindHost(host: EngineHost | undefined, lastInputSeq = 0): void {
    this.host = host;
    if (this.ended) return;
    if (host) {
      // Never reuse a seq the agent applied: a store that lost the newest inputs (the cluster's,
      // when the gateway that took them died first) would otherwise number a new one as old.
      this.inputSeq = Math.max(this.inputSeq, lastInputSeq);
      // Re-send what the agent never confirmed; it applies each input seq at most once.
      this.onInputAck(lastInputSeq);
      for (const p of this.pendingInputs.list()) {
        try {
          host.input(this.id, p.seq, p.line);
        } catch (err) {
          // One bad input must not stop the others, this session or the agent's hello.
          this.logger.warn({ sessionId: this.id, seq: p.seq, err: (err as Error).message }, 'dropping an input the agent link cannot take');
          this.pendingInputs.drop(p.seq);
        }
      }
    }
    if (!host) this.setState('agent-lost');
    else if (this.state === 'agent-lost' || this.state === 'starting') this.setState(this.prompts.size ? 'requires_action' : 'idle');
  }

  /**
   * One engine stdout line with the agent's seq. Returns false for a duplicate (already seen
   * seq, e.g. replayed after a reconnect), true when applied.
   */
  onEngineLine(agentSeq: number, line: Uint8Array, meta: LineMeta, readAtMs?: number): boolean {
    if (agentSeq <= this.lastAgentSeq) return false;
    this.lastAgentSeq = agentSeq;
    if (meta.type === 'control_response' && meta.request_id !== undefined && this.routeReply(meta.request_id, line)) return true;
    const hook = policyHookCall(meta, line);
    if (hook) return this.answerPolicyHook(hook); // the policy's own: never shown to clients, so none can answer it
    if (meta.type === 'control_request' && meta.request_id) this.raisePrompt(meta.request_id, meta.subtype ?? 'unknown', promptTool(meta, line));
    if (meta.type === 'control_cancel_request' && meta.request_id) this.prompts.withdraw(meta.request_id, 'cancelled by the engine');
    this.broadcast({ line, origin: 'engine' }, readAtMs);
    this.trackState(meta);
    return true;
  }

  /** An agent-side event (exit, diagnostics) in the agent's seq space. */
  onEngineEvent(agentSeq: number, event: TetherEvent): boolean {
    if (agentSeq <= this.lastAgentSeq) return false;
    this.lastAgentSeq = agentSeq;
    if (event.subtype === 'exited') this.end(event);
    else this.broadcast({ event, origin: 'gateway' });
    return true;
  }

  /**
   * Marks the session ended (engine gone): withdraws what was pending, then the state, then
   * the exit itself last, since readers stop at `exited`.
   */
  end(exited?: TetherEvent): void {
    if (this.ended) return;
    this.recordQuietly('tether', 'ended', exited?.subtype === 'exited' ? { code: exited.code, signal: exited.signal, reason: exited.reason } : {});
    for (const p of this.prompts.clear('engine gone')) this.broadcastWithdrawal(p.requestId);
    this.controls.clear();
    this.setState('ended');
    if (exited) this.broadcast({ event: exited, origin: 'gateway' });
    this.onEnded?.();
  }

  private trackState(meta: LineMeta): void {
    if (meta.type === 'system' && meta.subtype === 'session_state_changed') return; // the engine's own view; ours follows prompts
    if (this.prompts.size > 0) this.setState('requires_action');
    else if (meta.type === 'result') this.setState('idle');
    else if (meta.type === 'system' || meta.type === 'assistant' || meta.type === 'stream_event' || meta.type === 'control_cancel_request')
      this.setState('running');
  }

  private setState(state: SessionState, answering = false): void {
    if (this.state === state) return;
    // Unresponsive sticks until the engine answers what it owes; the state it would be in is kept for then.
    if (this.state === 'unresponsive' && !answering && state !== 'agent-lost' && state !== 'ended') {
      this.answeringState = state;
      return;
    }
    this.state = state;
    this.broadcast({ event: tetherEvent({ subtype: 'state', state }), origin: 'gateway' });
  }

  private raisePrompt(requestId: string, subtype: string, tool?: Record<string, unknown>): void {
    if (this.prompts.full) {
      this.logger.warn({ sessionId: this.id, requestId }, 'too many pending prompts; denying');
      this.metrics?.promptRaised();
      this.metrics?.promptSettled('overflow', 0);
      this.recordQuietly('tether:overflow', 'permission_decision', { request_id: requestId, ...tool, behavior: 'deny', reason: 'too many pending prompts' });
      this.answerEngine(requestId, subtype, `Denied by Tether: more than ${this.limits.maxPendingPrompts} requests pending`);
      return;
    }
    const timer = setTimeout(() => this.expire(requestId), this.limits.promptExpiryMs);
    timer.unref();
    this.prompts.raise({ requestId, subtype, raisedAt: Date.now(), timer, tool });
  }

  private expire(requestId: string): void {
    const p = this.prompts.withdraw(requestId, 'expired', 'expired');
    if (!p) return;
    this.recordQuietly('tether:expiry', 'permission_decision', { request_id: requestId, ...p.tool, behavior: 'deny', reason: 'expired' }); // denying goes ahead anyway
    this.answerEngine(requestId, p.subtype, `Permission request expired after ${Math.round(this.limits.promptExpiryMs / 1000)} s with no answer`);
    this.broadcastWithdrawal(requestId);
    this.broadcast({ event: tetherEvent({ subtype: 'prompt_decided', request_id: requestId, decided_by: 'tether:expiry', behavior: 'deny' }), origin: 'gateway' });
    if (this.prompts.size === 0 && this.state === 'requires_action') this.setState('running');
  }

  /**
   * Answers the policy hook from the policy in force: recorded first (a decision that cannot
   * be recorded becomes a deny), then shown to clients when a rule decided, then sent.
   */
  private answerPolicyHook(call: PolicyHookCall): true {
    const d = decideHook(this.policy.current, call);
    let answer = hookAnswer(call.requestId, d);
    try {
      this.record(POLICY_PRINCIPAL, 'policy_decision', hookAuditDetails(call, d));
      if (d.decision !== 'none' && d.rule) {
        this.broadcast({ event: tetherEvent({ subtype: 'policy_decision', tool_use_id: call.toolUseId, tool: call.tool, decision: d.decision, rule: d.rule }), origin: 'gateway' });
      }
    } catch (err) {
      answer = hookAnswer(call.requestId, { decision: 'deny' }, unauditedDenial(err));
    }
    try {
      this.toEngine(answer, GATEWAY_KEY);
    } catch (err) {
      // Unanswered, the hook times out and its onFailure "block" keeps the tool from running.
      this.logger.error({ sessionId: this.id, err: String(err) }, 'policy answer not queued for the engine');
    }
    return true;
  }

  /** Fail-closed answer from the gateway itself: deny for permission prompts, error otherwise. */
  private answerEngine(requestId: string, subtype: string, message: string): void {
    const response =
      subtype === DENY_ON_EXPIRY
        ? { subtype: 'success', request_id: requestId, response: { behavior: 'deny', message } }
        : { subtype: 'error', request_id: requestId, error: message };
    this.toEngine({ type: 'control_response', response }, GATEWAY_KEY);
  }

  /** Writes the record before the action; throws (and the caller applies nothing) when it cannot. */
  private record(principal: string, action: AuditEntry['action'], details: Record<string, unknown> = {}): void {
    recordOrRefuse(this.audit, { session_id: this.id, principal, action, ...details }, this.logger);
  }

  private recordQuietly(principal: string, action: AuditEntry['action'], details: Record<string, unknown> = {}): void {
    recordQuietly(this.audit, { session_id: this.id, principal, action, ...details }, this.logger);
  }

  /** Records, then applies; when applying then fails, a second record says so and the error goes on. */
  private audited(principal: string, action: AuditEntry['action'], details: Record<string, unknown>, apply: () => void): void {
    this.record(principal, action, details);
    try {
      apply();
    } catch (err) {
      this.recordQuietly(principal, action, { ...details, result: 'failed', code: failureCode(err) });
      throw err;
    }
  }

  // ---- client side ---------------------------------------------------------------------

  /**
   * Attaches a member and queues history from `fromSeq` (default: the beginning) followed
   * by the live stream. A position older than the log holds yields a gap notice first.
   */
  attach(member: Member, role: Role, fromSeq?: number, previousClientId?: string): number {
    if (this.members.size >= this.limits.maxMembers && !this.members.has(member.clientId)) {
      throw new TetherError('RESOURCE_EXHAUSTED', `session ${this.id} already has ${this.limits.maxMembers} clients attached`);
    }
    const from = fromSeq ?? 1;
    this.record(member.principal, 'attach', { client_id: member.clientId, role, from_seq: from });
    if (from < this.history.firstSeq) {
      const gap = tetherEvent({
        subtype: 'gap',
        from_seq: from,
        to_seq: this.history.firstSeq - 1,
        message: `frames ${from}..${this.history.firstSeq - 1} are no longer held; history resumes at ${this.history.firstSeq}`,
      });
      member.sendFrame(encodeEventFrame(this.id, 0, gap));
      this.metrics?.replayGap();
    }
    // History that is durable now; frames still on their way reach this member with everyone's.
    for (const entry of this.history.since(Math.max(from, this.history.firstSeq))) if (entry.seq <= this.outbox.releasedSeq) member.sendFrame(entry.bytes);
    this.members.set(member.clientId, { member, role, since: new Date().toISOString() });
    if (previousClientId !== undefined) for (const line of this.controls.takeOver(previousClientId, member.clientId, member.principal)) member.sendReply(this.id, line);
    this.broadcast({ event: tetherEvent({ subtype: 'presence', action: 'attached', principal: member.principal, client_id: member.clientId, role }), origin: 'gateway' });
    return this.history.lastSeq + 1;
  }

  detach(clientId: string): void {
    const a = this.members.get(clientId);
    if (!a) return;
    this.recordQuietly(a.member.principal, 'detach', { client_id: clientId }); // leaving never waits on the audit
    this.members.delete(clientId);
    // Requests in flight stay mapped: a client that re-attaches with previous_client_id gets its answers.
    this.broadcast({
      event: tetherEvent({ subtype: 'presence', action: 'detached', principal: a.member.principal, client_id: clientId, role: a.role }),
      origin: 'gateway',
    });
  }

  /**
   * The owner hands control to another attached client, or takes it back. Only an owner
   * may do it; `mayControl` says whether a client's token allows control at all. The
   * decision is about the target's principal: kept (and stored) so that principal's later
   * attachments get it too, and applied now to each of its attachments. A client of the
   * owner's own principal (attached read-only) changes alone, with no decision kept.
   */
  setRole(byClientId: string, targetClientId: string, role: RoleDecision, mayControl: (clientId: string) => boolean): void {
    const by = this.members.get(byClientId);
    if (!by) throw new TetherError('FAILED_PRECONDITION', `not attached to session ${this.id}`);
    if (by.role !== 'owner') throw new TetherError('PERMISSION_DENIED', 'only the session owner can change roles');
    const target = this.members.get(targetClientId);
    if (!target) throw new TetherError('NOT_FOUND', `no client ${targetClientId} is attached to session ${this.id}`);
    if (target.role === 'owner') throw new TetherError('FAILED_PRECONDITION', 'an owner attachment keeps its role');
    if (role === 'controller' && !mayControl(targetClientId)) throw new TetherError('PERMISSION_DENIED', `${target.member.principal}'s token does not allow control`);
    const principal = target.member.principal;
    const own = principal === this.owner;
    const changed = [...this.members.values()].filter(
      (a) => (own ? a === target : a.member.principal === principal) && a.role !== 'owner' && a.role !== role && (role === 'viewer' || mayControl(a.member.clientId)),
    );
    const recorded = changed.length ? changed : !own && this.roles.decided(principal) !== role ? [target] : [];
    // Recorded before it takes effect: a change that cannot be audited is not made.
    for (const a of recorded) this.record(by.member.principal, 'role_change', { client_id: a.member.clientId, target_principal: principal, role });
    if (!own) this.roles.decide(principal, role);
    for (const a of changed) {
      a.role = role;
      this.broadcast({
        event: tetherEvent({ subtype: 'presence', action: 'role_changed', principal, client_id: a.member.clientId, role }),
        origin: 'gateway',
      });
    }
  }

  roleOf(clientId: string): Role | undefined {
    return this.members.get(clientId)?.role;
  }

  /**
   * Applies one input line from an attached client, at most once per input id. Throws a
   * typed error (and changes nothing) when the client may not send it or it is malformed.
   */
  input(clientId: string, inputId: string, line: Record<string, unknown>): 'applied' | 'duplicate' {
    const a = this.members.get(clientId);
    if (!a) throw new TetherError('FAILED_PRECONDITION', `not attached to session ${this.id}`);
    if (a.role === 'viewer') throw new TetherError('PERMISSION_DENIED', 'viewers cannot send input to the session');
    // Size, depth and shape first: nothing of a line the engine cannot take is kept or broadcast.
    const bytes = checkEngineInput(line).length;
    const key = `${a.member.principal}\u0000${inputId}`; // survives the client reconnecting with a new client id
    if (this.recentInputs.has(key)) return 'duplicate';
    if (this.ended) throw new TetherError('FAILED_PRECONDITION', `session ${this.id} has ended`);
    if (line.type !== 'keep_alive') this.pendingInputs.assertRoom(bytes, this.id);
    this.route(a, line, key);
    this.recentInputs.set(key, true);
    if (this.recentInputs.size > 4096) this.recentInputs.delete(this.recentInputs.keys().next().value as string);
    return 'applied';
  }

  /** `key`: the client's dedupe key, stored with what the line sends to the engine. */
  private route(a: Attachment, line: Record<string, unknown>, key: string): void {
    switch (line.type) {
      case 'user':
        checkUserMessage(line);
        return this.audited(a.member.principal, 'prompt', { client_id: a.member.clientId, uuid: line.uuid, chars: promptChars(line) }, () => {
          this.broadcast({
            event: tetherEvent({ subtype: 'prompt', principal: a.member.principal, client_id: a.member.clientId, message: line.message }),
            origin: 'gateway',
          });
          this.toEngine(line, key);
          if (this.state === 'idle') this.setState('running');
        });
      case 'control_request':
        return this.forwardControlRequest(a, line, key);
      case 'control_response':
        return this.answerPrompt(a, line, key);
      case 'control_cancel_request':
        return this.forwardCancel(a, line, key);
      case 'keep_alive':
        return;
      default:
        throw new TetherError('INVALID_ARGUMENT', `unsupported input type ${JSON.stringify(line.type)} (expected user, control_request, control_response, control_cancel_request or keep_alive)`);
    }
  }

  private forwardControlRequest(a: Attachment, line: Record<string, unknown>, key: string): void {
    const request = line.request;
    if (typeof request !== 'object' || request === null || typeof (request as { subtype?: unknown }).subtype !== 'string') {
      throw new TetherError('INVALID_ARGUMENT', 'control_request needs a request object with a string subtype');
    }
    const req = request as Record<string, unknown>;
    this.audited(a.member.principal, 'control', { client_id: a.member.clientId, subtype: req.subtype, model: req.model, mode: req.mode }, () => {
      const gwId = this.controls.open(a.member.clientId, a.member.principal, line.request_id, req.subtype as string);
      try {
        this.toEngine({ ...line, request_id: gwId }, key);
      } catch (err) {
        this.controls.forget(gwId); // refused before it reached the engine: no answer will come
        throw err;
      }
    });
  }

  /**
   * The engine left a control request unanswered past the bound: the session is marked
   * unresponsive (every client gets the state and an engine_error saying why) until it answers.
   * Not while the agent is away: then the engine cannot answer, and the request is timed again.
   */
  private onControlOverdue(subtype: string, waitedMs: number): boolean {
    if (!this.host || this.ended) return false;
    if (this.state === 'unresponsive') return true;
    const message = `the engine did not answer ${subtype} within ${Math.round(waitedMs / 1000)} s; the owner can stop the session`;
    this.logger.warn({ sessionId: this.id, subtype, waitedMs }, 'engine unresponsive');
    this.metrics?.engineUnresponsive();
    this.answeringState = this.state;
    this.broadcast({ event: tetherEvent({ subtype: 'engine_error', code: 'UNRESPONSIVE', message }), origin: 'gateway' });
    this.setState('unresponsive', true);
    return true;
  }

  private forwardCancel(a: Attachment, line: Record<string, unknown>, key: string): void {
    this.toEngine({ ...line, request_id: this.controls.idOf(a.member.clientId, line.request_id) }, key);
  }

  private answerPrompt(a: Attachment, line: Record<string, unknown>, key: string): void {
    const response = line.response as { request_id?: unknown; subtype?: unknown } | undefined;
    if (typeof response !== 'object' || response === null || typeof response.request_id !== 'string') {
      throw new TetherError('INVALID_ARGUMENT', 'control_response needs response.request_id naming the pending request');
    }
    if (response.subtype !== 'success' && response.subtype !== 'error') {
      throw new TetherError('INVALID_ARGUMENT', 'control_response.response.subtype must be "success" or "error"');
    }
    const requestId = response.request_id;
    if (!this.prompts.has(requestId)) this.prompts.claim(requestId, a.member.principal); // throws the precise error
    const behavior = response.subtype === 'error' ? 'error' : String((line.response as { response?: { behavior?: unknown } }).response?.behavior ?? 'answered');
    // Recorded before it is forwarded: a decision that cannot be audited is not applied.
    const tool = this.prompts.get(requestId)?.tool;
    this.audited(a.member.principal, 'permission_decision', { request_id: requestId, ...tool, behavior, client_id: a.member.clientId }, () => {
      this.prompts.claim(requestId, a.member.principal, outcomeOf(behavior));
      this.toEngine(line, key);
    });
    this.broadcastWithdrawal(requestId);
    this.broadcast({ event: tetherEvent({ subtype: 'prompt_decided', request_id: requestId, decided_by: a.member.principal, behavior }), origin: 'gateway' });
    if (this.prompts.size === 0 && this.state === 'requires_action') this.setState('running');
  }

  /**
   * Queues one line for the engine, in the gateway's order. While the agent is away it waits
   * (bounded) and goes out when the agent is back; nothing is dropped. `key` is the dedupe key
   * of the client input it comes from (kept with it, so a restart still answers a retry
   * `duplicate`), or GATEWAY_KEY for the gateway's own answers.
   */
  private toEngine(line: Record<string, unknown>, key: string): void {
    const bytes = JSON.stringify(line).length;
    this.pendingInputs.assertRoom(bytes, this.id);
    const seq = ++this.inputSeq;
    this.store.appendInput(this.id, { seq, key, line });
    this.pendingInputs.push({ seq, line, bytes });
    this.host?.input(this.id, seq, line);
  }

  /** The agent wrote every input up to `seq` to the engine. */
  onInputAck(seq: number): void {
    this.pendingInputs.ack(seq);
  }

  /** Sends the engine's answer to the one client that asked, with its own request id back. */
  private routeReply(gwId: string, line: Uint8Array): boolean {
    const text = Buffer.from(line.buffer, line.byteOffset, line.byteLength).toString('utf8'); // rare: answers to clients' own requests
    const route = this.controls.answer(gwId, text, (clientId) => this.members.has(clientId));
    if (route.kind === 'deliver') this.members.get(route.clientId)!.member.sendReply(this.id, route.line);
    return route.kind !== 'not-ours';
  }

  private broadcastWithdrawal(requestId: string): void {
    this.broadcast({ line: Buffer.from(JSON.stringify({ type: 'control_cancel_request', request_id: requestId })), origin: 'gateway' });
  }

  /** Appends one frame to history and hands the same bytes to every member. */
  private broadcast(body: { line: Uint8Array; origin: 'engine' | 'gateway' } | { event: TetherEvent; origin: 'gateway' }, readAtMs?: number): void {
    const seq = this.history.lastSeq + 1;
    const bytes = 'line' in body ? encodeLineFrame(this.id, seq, body.origin, body.line) : encodeEventFrame(this.id, seq, body.event);
    this.store.appendFrame(this.id, { seq, agentSeq: this.lastAgentSeq, bytes });
    this.history.append({ seq, bytes });
    this.outbox.push(seq, bytes, readAtMs);
  }

  /** Stops the engine (owner or controller); `signal` says how hard (core/protocol/methods.ts StopSignal). */
  async stop(clientId: string | undefined, reason: string, signal?: StopSignal): Promise<void> {
    if (clientId !== undefined) {
      const role = this.roleOf(clientId);
      if (!role) throw new TetherError('FAILED_PRECONDITION', `not attached to session ${this.id}`);
      if (role === 'viewer') throw new TetherError('PERMISSION_DENIED', 'viewers cannot stop the session');
    }
    if (this.ended) return;
    if (this.stopping && signal === undefined) return this.stopping; // one graceful stop toward the agent, however many ask at once
    if (!this.host) throw new TetherError('UNAVAILABLE', `the agent of session ${this.id} is not connected`);
    const by = clientId ? (this.members.get(clientId)?.member.principal ?? 'unknown') : 'tether';
    this.record(by, 'stop', { reason });
    const stopped = this.host.stop(this.id, reason, signal).catch((err: unknown) => {
      this.recordQuietly(by, 'stop', { reason, result: 'failed', code: failureCode(err) });
      throw err;
    });
    if (signal !== undefined) return stopped; // a signal always goes through (it may escalate a graceful stop)
    this.stopping = stopped.finally(() => (this.stopping = undefined));
    return this.stopping;
  }
}
