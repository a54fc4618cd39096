import { TetherError } from '../../core/errors.js';
import { INPUT_REFUSED, tetherEvent, type Role, type SessionState, type TetherEvent } from '../../core/protocol/events.js';
import type { LineMeta, SessionInfo, StopSignal } from '../../core/protocol/methods.js';
import type { EngineKind, SessionOptions } from '../../core/protocol/session-options.js';
import type { Logger } from '../../core/logging.js';
import type { ReplayLogLimits } from './history/replay-log.js';
import { failureCode, type AuditLog } from '../audit/audit-log.js';
import type { GatewayMetrics } from '../metrics.js';
import type { SessionStore, StoredSession } from './session-store.js';
import type { Durability } from './history/durability.js';
import type { EngineInfo } from './engine-info.js';
import { ControlRouting } from './control-routing.js';
import { SessionRoles, type RoleDecision } from './session-roles.js';
import { StaticPolicy, type PolicyProvider } from '../policy/policy-source.js';
import { SessionAudit } from './session-audit.js';
import { SessionWorktree } from './session-worktree.js';
import { SessionStatus } from './session-status.js';
import { factOf, SessionHistory } from './history/session-history.js';
import { EngineInputs, GATEWAY_KEY, type EngineHost } from './engine-inputs.js';
import { SessionPrompts } from './turns/session-prompts.js';
import { StandingRules } from './turns/standing-rules.js';
import { SessionMembers, type Cut, type Member } from './session-members.js';
import { InputRouting } from './input-routing.js';
import { OutputRouting } from './output-routing.js';
import { PromptQueue } from './turns/prompt-queue.js';
import { TurnAuthors } from './turns/turn-authors.js';
import { engineTitleOf, SessionTitleKeeper } from './session-title.js';
import type { Principal } from '../door/principal.js';
import type { UsageDesk } from '../usage/usage-desk.js';
import type { NoticeSink, SessionNotice } from './session-notices.js';

export type { EngineHost } from './engine-inputs.js';
export type { Member } from './session-members.js';
// The session room's face: what other rooms need of its parts comes through here.
export { REPLAY_DEFAULTS, ReplayLog, type ReplayLogLimits } from './history/replay-log.js';
export { requireControlScope, type RoleDecisions } from './session-roles.js';
export { DEFAULT_CONTROL_ANSWER_MS } from './control-routing.js';
export { Durability } from './history/durability.js';
export type { EngineInfo, McpServer } from './engine-info.js';
export type { NoticeSink, SessionNotice } from './session-notices.js';

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
  /** The owner's display name, where the door knows one (an OIDC sign-in). */
  ownerName?: string;
  options: SessionOptions;
  host: EngineHost | undefined;
  limits: SessionLimits;
  logger: Logger;
  audit: AuditLog;
  store: SessionStore;
  /** When what the session appended to `store` may be shown (the gateway's one Durability over it). */
  durability: Durability;
  /** History read back from the store after a restart. */
  restored?: StoredSession;
  /** What the session reports to the gateway's metrics (prompts, replay gaps); none by default. */
  metrics?: SessionMetrics;
  /** The central policy that answers the engine's policy hook (default: no rules). */
  policy?: PolicyProvider;
  /** The gateway's usage room: turns booked, prompts held to the policy's budgets (default: neither). */
  usage?: UsageDesk;
  /** Where things a person away from the tab may need are told (session-notices.ts); none by default. */
  notices?: NoticeSink;
}

/** The part of the gateway's metrics a session reports to. */
export type SessionMetrics = Pick<GatewayMetrics, 'promptRaised' | 'promptSettled' | 'replayGap' | 'engineUnresponsive'>;

/**
 * One live engine session, composed of its parts: history (`session-history.ts`: frames
 * numbered, stored, replayed), the way to the engine (`engine-inputs.ts`), who is attached
 * (`session-members.ts`, roles in `session-roles.ts`), client input (`input-routing.ts`),
 * engine output (`output-routing.ts`), prompts (`session-prompts.ts`), the state
 * (`session-status.ts`) and the audit (`session-audit.ts`). This class wires them and keeps
 * the session's life: binding to its agent, ending, stopping. Knows nothing of sockets,
 * processes or wire text.
 */
/** What a listing shows of a session, as Session.checkChange last saw it. */
interface Listed {
  state: string;
  prompts: number;
  title: string | undefined;
  owner: string;
  agent: string;
  awayMs: number | undefined;
  clients: number;
}

export class Session {
  readonly createdAt: string;
  /** Called once when the session ends (the directory schedules its removal). */
  onEnded: (() => void) | undefined;
  /**
   * Called when what a listing shows of the session changed (state, prompts waiting, title,
   * owner, members, agent away): at most once per event-loop turn, after the frames that changed it went out.
   */
  onChange: (() => void) | undefined;
  /** What a listing showed when onChange last fired (see checkChange). */
  private readonly shown: Listed = { state: '', prompts: -1, title: undefined, owner: '', agent: '', awayMs: undefined, clients: -1 };
  private changeQueued = false;
  /** When the session ended (epoch ms); undefined while it runs. */
  private endedAtMs: number | undefined;
  private readonly titles = new SessionTitleKeeper();
  /**
   * What the engine told of itself in system/init, as the JSON-RPC dialect read it from the
   * frames (for its `initialize` and `session_attach` answers); undefined until one did.
   * Kept here so it lives and dies with the session.
   */
  engineInfo: EngineInfo | undefined;
  /**
   * The engine's own session id (its system/init says it), which `--resume` takes when the
   * agent comes back without the engine; undefined before the engine's first turn.
   */
  engineSessionId: string | undefined;
  /** When the agent's link was lost (epoch ms); undefined while the session has its agent. */
  private lostAtMs: number | undefined;
  /** The stop in flight toward the agent, shared by everyone who asks meanwhile. */
  private stopping: Promise<void> | undefined;

  readonly id: string;
  /** The agent that runs the engine (session.move changes it). */
  agent: string;
  readonly engine: EngineKind;
  /** The options the engine runs with (a move may change the folder). */
  options: SessionOptions;
  /** Who gets which role: token scope, owner and the owner's decisions (kept in the store). */
  readonly roles: SessionRoles;
  private readonly logger: Logger;
  private readonly metrics: SessionMetrics | undefined;
  private readonly audit: SessionAudit;
  private readonly status: SessionStatus;
  private readonly history: SessionHistory;
  private readonly inputs: EngineInputs;
  /** Clients' control requests in flight to the engine, kept apart per client, each timed. */
  private readonly controls: ControlRouting;
  private readonly prompts: SessionPrompts;
  private readonly standing = new StandingRules();
  private readonly queue: PromptQueue;
  /** Who sent each prompt, and whose turn the engine runs. */
  private readonly turns = new TurnAuthors();
  private readonly members: SessionMembers;
  /** The owner's display name as last seen, with the principal it belongs to (a handover drops it). */
  private knownOwnerName: { principal: string; name: string } | undefined;
  private readonly routing: InputRouting;
  private readonly output: OutputRouting;
  /** Its git worktree, when the create asked for one (the agent's reports). */
  private readonly worktree: SessionWorktree;
  private readonly notices: NoticeSink | undefined;

  constructor(init: SessionInit) {
    const { id, store, limits, restored } = init;
    this.id = id;
    this.agent = init.agent;
    this.engine = init.engine;
    this.options = init.options;
    if (init.ownerName !== undefined) this.knownOwnerName = { principal: init.owner, name: init.ownerName };
    this.createdAt = restored?.record.created_at ?? new Date().toISOString();
    this.logger = init.logger;
    this.notices = init.notices;
    this.audit = new SessionAudit(id, init.audit, init.logger);
    this.worktree = new SessionWorktree(this.audit, () => ({ owner: this.owner, agent: this.agent }));
    this.status = new SessionStatus((state) => this.history.append({ event: tetherEvent({ subtype: 'state', state }) }));
    // Restored history is durable already; everything after goes out once the store holds it.
    this.history = new SessionHistory(
      id,
      store,
      init.durability,
      limits.replay,
      (bytes, readAtMs) => {
        this.members.deliver(bytes, readAtMs);
        this.queueChangeCheck();
      },
      restored?.frames,
    );
    this.inputs = new EngineInputs(id, store, init.logger, init.host);
    this.controls = new ControlRouting({
      answerWithinMs: limits.controlAnswerMs,
      onOverdue: (subtype, waitedMs) => this.onControlOverdue(subtype, waitedMs),
      onCaughtUp: () => this.status.caughtUp(),
    });
    const parts = {
      sessionId: id,
      history: this.history,
      inputs: this.inputs,
      status: this.status,
      audit: this.audit,
      controls: this.controls,
    };
    const policy = init.policy ?? new StaticPolicy();
    const owner = () => this.roles.owner;
    this.prompts = new SessionPrompts({
      ...parts,
      turns: this.turns,
      agent: init.agent,
      turnApproval: init.options.turn_approval,
      cwd: init.options.cwd,
      maxPending: limits.maxPendingPrompts,
      expiryMs: limits.promptExpiryMs,
      logger: init.logger,
      policy,
      standing: this.standing,
      notify: (n) => this.notify(n),
      // Read when a call is judged: the owner can hand the session over (session.set_owner).
      get owner() {
        return owner();
      },
    });
    this.roles = new SessionRoles(init.owner, restored?.roles, (decisions) => store.saveRoles(id, decisions));
    this.metrics = init.metrics;
    this.members = new SessionMembers({
      ...parts,
      maxMembers: limits.maxMembers,
      roles: this.roles,
      onGap: () => this.metrics?.replayGap(),
    });
    this.queue = new PromptQueue(this.history);
    this.routing = new InputRouting({
      ...parts,
      prompts: this.prompts,
      queue: this.queue,
      policy,
      cwd: init.options.cwd,
      turns: this.turns,
      titles: this.titles,
      stamp: init.options.client_initialize !== true,
      usage: init.usage,
      agent: () => this.agent,
    });
    this.output = new OutputRouting({
      ...parts,
      prompts: this.prompts,
      members: this.members,
      policy,
      queue: this.queue,
      turns: this.turns,
      usage: init.usage,
      agent: () => this.agent,
      owner,
    });
    if (restored) this.restore(restored, init.usage);
    else store.create({ id, agent: this.agent, engine: this.engine, owner: init.owner, options: this.options, created_at: this.createdAt });
    this.prompts.observer = init.metrics; // after the restore: restored prompts were counted by the process that raised them
  }

  /**
   * Rebuilds state, pending prompts and input bookkeeping from the store (history itself was
   * read back by SessionHistory). The session then waits for its agent ('agent-lost') unless it had ended.
   */
  private restore(stored: StoredSession, usage: UsageDesk | undefined): void {
    let lastResult: { totalCostUsd: number; resultIndex?: number } | undefined;
    for (const f of stored.frames) {
      const fact = factOf(f.bytes);
      if (fact?.kind === 'state') {
        this.status.restore(fact.state);
        if (fact.state === 'ended') this.endedAtMs = fact.at === undefined ? Date.now() : Date.parse(fact.at);
      } else if (fact?.kind === 'title') this.titles.named(fact.title);
      else if (fact?.kind === 'prompted') this.titles.prompted(fact.message);
      else if (fact?.kind === 'prompt') this.prompts.raise(fact.requestId, fact.subtype, fact.request);
      else if (fact?.kind === 'withdrawn') this.prompts.withdraw(fact.requestId, 'withdrawn');
      else if (fact?.kind === 'engine_session') this.engineSessionId = fact.engineSessionId;
      else if (fact?.kind === 'owner') this.roles.setOwner(fact.owner);
      else if (fact?.kind === 'moved') this.moved(fact.agent, fact.cwd);
      else if (fact?.kind === 'worktree') this.worktree.restore(fact.worktree);
      else if (fact?.kind === 'result') lastResult = fact;
    }
    // The engine's running cost total so far: its next turn is costed against it, even where this
    // gateway's ledger never booked the turns before (a session that came from another gateway).
    if (lastResult) usage?.ledger.seed(this.id, { engine_total_usd: lastResult.totalCostUsd, result_index: lastResult.resultIndex });
    this.inputs.restore(stored.inputs);
    if (this.ended) return;
    this.status.restore('agent-lost');
    this.lostAtMs = Date.now();
  }

  private notify(n: SessionNotice): void {
    try {
      this.notices?.(this.id, n);
    } catch (err) {
      this.logger.warn({ sessionId: this.id, err: String(err) }, 'a notice listener failed'); // routing goes on
    }
  }

  /** Who owns the session now: its creator, or whom an owner handed it to. */
  get owner(): string {
    return this.roles.owner;
  }

  get currentState(): SessionState {
    return this.status.current;
  }

  get ended(): boolean {
    return this.status.current === 'ended';
  }

  /** Inputs queued for the engine that the agent has not yet confirmed written (re-sent if it reconnects). */
  get unconfirmedInputs(): number {
    return this.inputs.unconfirmed;
  }

  /** The next output seq the gateway expects from the agent (for agent resume). */
  get nextAgentSeq(): number {
    return this.history.nextAgentSeq;
  }

  /** Since when the session has been without its agent (ISO time); undefined while it has it. */
  get agentAwaySince(): string | undefined {
    return this.lostAtMs === undefined ? undefined : new Date(this.lostAtMs).toISOString();
  }

  /** What `SessionInfo` says of this session now; `clients` lists the earliest `maxMembers` members (default all). */
  info(maxMembers = Infinity): SessionInfo {
    const away = this.agentAwaySince;
    const ownerName = this.ownerNameNow();
    return {
      id: this.id,
      agent: this.agent,
      engine: this.engine,
      owner: this.owner,
      ...(ownerName === undefined ? {} : { owner_name: ownerName }),
      state: this.status.current,
      created_at: this.createdAt,
      clients: this.members.info(maxMembers),
      client_count: this.members.count,
      pending_prompts: this.prompts.size,
      last_seq: this.history.lastSeq,
      options: this.options,
      ...(away && !this.ended ? { agent_away_since: away, queued_inputs: this.inputs.unconfirmed } : {}),
      ...(this.worktree.current ? { worktree: this.worktree.current } : {}),
      ...(this.titles.current === undefined ? {} : { title: this.titles.current }),
    };
  }

  /**
   * The owner's display name: an attached member's of the owner's principal, else the last one
   * seen (kept in memory only: after a restart it is known again when the owner attaches).
   */
  private ownerNameNow(): string | undefined {
    const seen = this.members.nameOf(this.owner);
    if (seen !== undefined) this.knownOwnerName = { principal: this.owner, name: seen };
    return this.knownOwnerName?.principal === this.owner ? this.knownOwnerName.name : undefined;
  }

  /** The session's title (session-title.ts); undefined before its first prompt or name. */
  get title(): string | undefined {
    return this.titles.current;
  }

  /** When the session ended (ISO time); undefined while it runs. */
  get endedAt(): string | undefined {
    return this.endedAtMs === undefined ? undefined : new Date(this.endedAtMs).toISOString();
  }

  /** The prompts waiting that `p` may answer (their role and the turn's approval allow it), oldest first. */
  waitingFor(p: Principal): ReturnType<SessionPrompts['answerableBy']> {
    if (this.ended || this.roles.roleFor(p) === 'viewer') return [];
    return this.prompts.answerableBy(p.sub);
  }

  /**
   * The owner (or an admin) names the session: every member reads `title_changed`, which is
   * also how a restarted gateway knows the title. PERMISSION_DENIED for anyone else.
   */
  rename(p: Principal, title: string): void {
    if (p.sub !== this.owner && !p.canAdmin)
      throw new TetherError('PERMISSION_DENIED', `only the session's owner (${this.owner}) may rename it`);
    if (this.ended) throw new TetherError('FAILED_PRECONDITION', `session ${this.id} has ended`);
    this.titles.named(title);
    this.audit.quietly(p.sub, 'rename', { title });
    this.history.append({ event: tetherEvent({ subtype: 'title_changed', title, by: p.sub }) });
  }

  /** Tells onChange, once per event-loop turn, when what a listing shows changed. */
  private queueChangeCheck(): void {
    if (this.changeQueued || !this.onChange) return;
    this.changeQueued = true;
    setImmediate(this.checkChange);
  }

  /**
   * What info() shows a listing (state, prompts waiting, title, owner, agent, agent away, members),
   * compared field by field with what it showed last: it runs after every frame's turn, so it
   * builds nothing (no info(), no string).
   */
  private readonly checkChange = (): void => {
    this.changeQueued = false;
    const s = this.shown;
    const awayMs = this.ended ? undefined : this.lostAtMs;
    const clients = this.members.count;
    if (
      s.state === this.status.current &&
      s.prompts === this.prompts.size &&
      s.title === this.titles.current &&
      s.owner === this.owner &&
      s.agent === this.agent &&
      s.awayMs === awayMs &&
      s.clients === clients
    )
      return;
    s.state = this.status.current;
    s.prompts = this.prompts.size;
    s.title = this.titles.current;
    s.owner = this.owner;
    s.agent = this.agent;
    s.awayMs = awayMs;
    s.clients = clients;
    this.onChange?.();
  };

  // ---- engine side ---------------------------------------------------------------------

  /** The agent (re)bound this session; `host` undefined means the agent link is down. */
  bindHost(host: EngineHost | undefined, lastInputSeq = 0): void {
    this.inputs.bind(host);
    if (this.ended) return;
    // Re-send what the agent never confirmed; it applies each input seq at most once.
    this.inputs.resendAfter(lastInputSeq);
    if (host) this.lostAtMs = undefined;
    else this.lostAtMs ??= Date.now();
    if (!host && this.status.current !== 'agent-lost') {
      this.status.set('agent-lost');
      this.notify({ kind: 'agent_lost', seq: this.history.lastSeq });
    } else if (!host) this.status.set('agent-lost');
    else if (this.status.current === 'agent-lost' || this.status.current === 'starting')
      this.status.set(this.prompts.size ? 'requires_action' : 'idle');
  }

  /**
   * Where a new engine continues this session when its agent came back without the old one:
   * the transcript to resume (undefined before the engine's first turn: nothing to resume),
   * the agent seq its output continues at, and the last input the old engine confirmed.
   */
  continuation(): { engineSessionId: string | undefined; nextSeq: number; lastInputSeq: number } {
    return {
      engineSessionId: this.engineSessionId ?? this.options.resume,
      nextSeq: this.history.nextAgentSeq,
      lastInputSeq: this.inputs.confirmedSeq,
    };
  }

  /**
   * The agent started a new engine on this session's transcript (docs/protocol.md, "A session
   * across agent restarts"). What the old engine had asked (prompts, control requests) is
   * withdrawn, since the new one never asked it; every member is told, with the gap and
   * whether a turn was cut short; then the inputs the old engine never confirmed go to the new
   * one, once each (the agent applies each input seq at most once).
   */
  engineResumed(host: EngineHost): void {
    if (this.ended) return;
    const gapMs = this.lostAtMs === undefined ? 0 : Math.max(0, Date.now() - this.lostAtMs);
    const cut = this.status.turnCutShort;
    const resent = this.inputs.unconfirmed;
    this.audit.quietly('tether', 'engine_resumed', { gap_ms: gapMs, interrupted_turn: cut, resent_inputs: resent });
    this.prompts.clear('engine restarted');
    this.controls.clear();
    const message = `engine resumed after the agent restarted (${Math.round(gapMs / 1000)} s without an engine)${cut ? '; the turn that was running was interrupted' : ''}`;
    this.history.append({
      event: tetherEvent({ subtype: 'engine_resumed', gap_ms: gapMs, interrupted_turn: cut, resent_inputs: resent, message }),
    });
    this.bindHost(host, this.inputs.confirmedSeq);
  }

  /**
   * The session leaves its agent for `agent` (session.move; the engine there is being started on
   * the transcript): inputs wait for the new engine; every member reads the `moved` event, which is
   * also how a restarted gateway knows where the session runs. Bind the new engine with
   * {@link bindHost} and {@link Session.continuation}'s input seq.
   */
  moveTo(agent: string, cwd: string | undefined, by: string): void {
    const from = this.agent;
    this.inputs.bind(undefined);
    this.moved(agent, cwd);
    this.history.append({
      event: tetherEvent({ subtype: 'moved', from_agent: from, to_agent: agent, ...(cwd === undefined ? {} : { cwd }), moved_by: by }),
    });
  }

  private moved(agent: string, cwd: string | undefined): void {
    this.agent = agent;
    if (cwd !== undefined) this.options = { ...this.options, cwd };
  }

  /** Ends the session: its engine could not be started again after the agent restarted (`detail`: the engine's or agent's words). */
  resumeFailed(detail: string): void {
    this.end(tetherEvent({ subtype: 'exited', code: null, signal: null, stderr_tail: '', reason: this.resumeFailure(detail) }));
  }

  private resumeFailure(detail: string): string {
    const what =
      this.engineSessionId === undefined
        ? 'a new engine could not be started'
        : `the engine's transcript ${this.engineSessionId} could not be resumed`;
    return `the agent restarted and ${what}: ${detail.trim().slice(-2000) || 'no reason given'}`;
  }

  /**
   * One engine stdout line with the agent's seq. Returns false for a duplicate (already seen
   * seq, e.g. replayed after a reconnect), true when applied.
   */
  onEngineLine(agentSeq: number, line: Uint8Array, meta: LineMeta, readAtMs?: number): boolean {
    if (!this.history.acceptAgentSeq(agentSeq)) return false;
    if (meta.engine_session_id !== undefined) this.engineSessionId = meta.engine_session_id;
    if (meta.type === 'system' && meta.subtype === 'session_title_changed') {
      const title = engineTitleOf(line);
      if (title !== undefined) this.titles.named(title);
    }
    this.output.line(line, meta, readAtMs);
    if (meta.type === 'result') this.notify({ kind: 'turn_complete', seq: this.history.lastSeq, subtype: meta.subtype });
    return true;
  }

  /** An agent-side event (exit, diagnostics) in the agent's seq space. */
  onEngineEvent(agentSeq: number, event: TetherEvent): boolean {
    if (!this.history.acceptAgentSeq(agentSeq)) return false;
    // An engine that exits before the session is bound again is one started after an agent restart.
    if (event.subtype === 'exited')
      this.end(!this.inputs.host && event.reason === undefined ? { ...event, reason: this.resumeFailure(event.stderr_tail) } : event);
    else {
      if (event.subtype === 'worktree') this.worktree.reported(event.worktree);
      this.history.append({ event });
    }
    // A prompt the agent refused starts no turn; should one run after all, its output sets running again.
    if (event.subtype === 'engine_error' && event.code === INPUT_REFUSED && this.status.current === 'running') this.status.set('idle');
    return true;
  }

  /**
   * Marks the session ended (engine gone): withdraws what was pending, then the state, then
   * the exit itself last, since readers stop at `exited`.
   */
  end(exited?: TetherEvent): void {
    if (this.ended) return;
    this.audit.quietly(
      'tether',
      'ended',
      exited?.subtype === 'exited' ? { code: exited.code, signal: exited.signal, reason: exited.reason } : {},
    );
    this.prompts.clear('engine gone');
    this.controls.clear();
    this.endedAtMs = Date.now();
    this.status.set('ended');
    if (exited) this.history.append({ event: exited });
    this.notify({ kind: 'ended', reason: exited?.subtype === 'exited' ? exited.reason : undefined });
    this.onEnded?.();
  }

  /** The agent wrote every input up to `seq` to the engine. */
  onInputAck(seq: number): void {
    this.inputs.ack(seq);
  }

  /**
   * The engine left a control request unanswered past the bound: the session is marked
   * unresponsive (every client gets the state and an engine_error saying why) until it answers.
   * Not while the agent is away: then the engine cannot answer, and the request is timed again.
   */
  private onControlOverdue(subtype: string, waitedMs: number): boolean {
    if (!this.inputs.host || this.ended) return false;
    if (this.status.current === 'unresponsive') return true;
    const message = `the engine did not answer ${subtype} within ${Math.round(waitedMs / 1000)} s; the owner can stop the session`;
    this.logger.warn({ sessionId: this.id, subtype, waitedMs }, 'engine unresponsive');
    this.metrics?.engineUnresponsive();
    this.history.append({ event: tetherEvent({ subtype: 'engine_error', code: 'UNRESPONSIVE', message }) });
    this.status.unresponsive();
    return true;
  }

  // ---- client side ---------------------------------------------------------------------

  /** See SessionMembers.attach. */
  attach(member: Member, role: Role, fromSeq?: number, previousClientId?: string): number {
    return this.members.attach(member, role, fromSeq, previousClientId);
  }

  /** The directory drops the session (its store entry goes next): nothing it holds back is appended later. */
  dispose(): void {
    this.members.dispose();
  }

  /** See SessionMembers.detach. */
  detach(clientId: string, cut?: Cut): void {
    this.members.detach(clientId, cut);
  }

  /**
   * The owner hands the session over (SessionMembers.handOver); every member reads it in an
   * `owner_changed` event, which is also how a restarted gateway knows the owner.
   */
  setOwner(byClientId: string, to: string, known: (principal: string) => boolean): void {
    if (this.ended) throw new TetherError('FAILED_PRECONDITION', `session ${this.id} has ended`);
    const from = this.members.handOver(byClientId, to, known);
    this.history.append({ event: tetherEvent({ subtype: 'owner_changed', owner: to, previous_owner: from }) });
  }

  /** See SessionMembers.setRole. */
  setRole(byClientId: string, targetClientId: string, role: RoleDecision, mayControl: (clientId: string) => boolean): void {
    this.members.setRole(byClientId, targetClientId, role, mayControl);
  }

  /**
   * Withdraws a standing rule of the session (StandingRules): the owner, or who granted it.
   * Audited; every member is told; the rule's calls ask again at once.
   */
  withdrawRule(byClientId: string, rule: string): void {
    const principal = this.members.principalOf(byClientId);
    const role = this.members.roleOf(byClientId);
    if (principal === undefined || role === undefined) throw new TetherError('FAILED_PRECONDITION', 'attach to the session first');
    if (role === 'viewer') throw new TetherError('PERMISSION_DENIED', 'a viewer cannot withdraw rules');
    if (this.status.current === 'ended') throw new TetherError('FAILED_PRECONDITION', `session ${this.id} has ended`);
    const details = { client_id: byClientId, rule };
    try {
      this.standing.check(rule, principal, role === 'owner');
    } catch (err) {
      this.audit.quietly(principal, 'rule_withdrawn', {
        ...details,
        result: 'refused',
        code: failureCode(err),
        reason: (err as Error).message,
      });
      throw err;
    }
    this.audit.audited(principal, 'rule_withdrawn', details, () => {
      this.standing.withdraw(rule, principal, role === 'owner');
      this.history.append({ event: tetherEvent({ subtype: 'rule_withdrawn', rule, withdrawn_by: principal }) });
    });
  }

  /**
   * Withdraws a queued prompt before it starts: its author or the session's owner (checked
   * here; clients cannot send `cancel_async_message` themselves). Audited; every member sees
   * it marked, then gone once the engine confirms (`command_lifecycle` cancelled). A prompt
   * that started meanwhile runs, and is shown so.
   */
  withdrawPrompt(byClientId: string, uuid: string): void {
    const a = this.members.attached(byClientId);
    if (a.role === 'viewer') throw new TetherError('PERMISSION_DENIED', 'a viewer cannot withdraw prompts');
    if (this.ended) throw new TetherError('FAILED_PRECONDITION', `session ${this.id} has ended`);
    const principal = a.member.principal;
    const details = { client_id: byClientId, uuid };
    try {
      this.queue.beginWithdraw(uuid, principal, a.role === 'owner');
    } catch (err) {
      this.audit.quietly(principal, 'prompt_withdrawn', {
        ...details,
        result: 'refused',
        code: failureCode(err),
        reason: (err as Error).message,
      });
      throw err;
    }
    try {
      this.audit.audited(principal, 'prompt_withdrawn', details, () =>
        this.toEngineAsGateway('cancel_async_message', { message_uuid: uuid }),
      );
    } catch (err) {
      this.queue.abortWithdraw(uuid);
      throw err;
    }
  }

  /** A control request of the gateway's own (its answer goes to no client). */
  private toEngineAsGateway(subtype: string, fields: Record<string, unknown>): void {
    const gwId = this.controls.open('tether:gateway', 'tether:gateway', undefined, subtype);
    try {
      this.inputs.toEngine({ type: 'control_request', request_id: gwId, request: { subtype, ...fields } }, GATEWAY_KEY);
    } catch (err) {
      this.controls.forget(gwId);
      throw err;
    }
  }

  /**
   * A person answers a tool prompt from outside the session (a notification's Allow or Deny):
   * the role their token would get on attach decides (a viewer may not), then the same
   * first-answer-wins path as an attached client's answer. Throws PERMISSION_DENIED,
   * FAILED_PRECONDITION (ended, or already decided: `already_decided`), NOT_FOUND.
   */
  answerAsPerson(p: Principal, requestId: string, behavior: 'allow' | 'deny'): void {
    if (this.roles.roleFor(p) === 'viewer') throw new TetherError('PERMISSION_DENIED', `${p.sub} may only view session ${this.id}`);
    if (this.ended) throw new TetherError('FAILED_PRECONDITION', `session ${this.id} has ended`);
    this.prompts.answerPlain(
      { principal: p.sub, clientId: 'tether:notification' },
      requestId,
      behavior,
      `${p.sub}\u0000notify:${requestId}`,
    );
  }

  roleOf(clientId: string): Role | undefined {
    return this.members.roleOf(clientId);
  }

  /**
   * Applies one input line from an attached client, at most once per input id. Throws a
   * typed error (and changes nothing) when the client may not send it or it is malformed.
   * `onApplied` gets the line as serialized when it was applied.
   */
  input(clientId: string, inputId: string, line: Record<string, unknown>, onApplied?: (text: string) => void): 'applied' | 'duplicate' {
    const a = this.members.attached(clientId);
    if (a.role === 'viewer') throw new TetherError('PERMISSION_DENIED', 'viewers cannot send input to the session');
    return this.routing.input(a.member, inputId, line, this.ended, onApplied);
  }

  /** Stops the engine (owner or controller); `signal` says how hard (core/protocol/methods.ts StopSignal). */
  async stop(clientId: string | undefined, reason: string, signal?: StopSignal): Promise<void> {
    if (clientId !== undefined && this.members.attached(clientId).role === 'viewer')
      throw new TetherError('PERMISSION_DENIED', 'viewers cannot stop the session');
    if (this.ended) return;
    if (this.stopping && signal === undefined) return this.stopping; // one graceful stop toward the agent, however many ask at once
    const host = this.inputs.host;
    if (!host) throw new TetherError('UNAVAILABLE', `the agent of session ${this.id} is not connected`);
    const by = clientId ? (this.members.principalOf(clientId) ?? 'unknown') : 'tether';
    this.audit.record(by, 'stop', { reason });
    const stopped = host.stop(this.id, reason, signal).catch((err: unknown) => {
      this.audit.quietly(by, 'stop', { reason, result: 'failed', code: failureCode(err) });
      throw err;
    });
    if (signal !== undefined) return stopped; // a signal always goes through (it may escalate a graceful stop)
    this.stopping = stopped.finally(() => (this.stopping = undefined));
    return this.stopping;
  }
}
