import { TetherError } from '../../core/errors.js';
import { TraceSlot, type Tracer } from '../../core/telemetry/tracer.js';
import type { Logger } from '../../core/logging.js';
import { tetherEvent } from '../../core/protocol/events.js';
import type { AgentInfo, SessionInfo } from '../../core/protocol/methods.js';
import { assertSessionOptionsBounded, type EngineKind, type SessionOptions } from '../../core/protocol/session-options.js';
import type { AgentLink } from './agent-link.js';
import type { EngineControlAllowance } from '../../core/engine-controls.js';
import type { Principal } from '../door/principal.js';
import { Session, type SessionLimits } from '../session/session.js';
import { failureCode, recordOrRefuse, recordQuietly, type AuditLog } from '../audit/audit-log.js';
import type { SessionStore, StoredSession } from '../session/session-store.js';
import type { Durability, NoticeSink } from '../session/session.js';
import type { GatewayMetrics } from '../metrics.js';
import { AgentWaits } from './agent-waits.js';
import { resumeEngine } from './engine-resume.js';
import { PendingCreates, type CreateRequest } from './pending-creates.js';
import { StaticPolicy, type PolicyProvider } from '../policy/policy-source.js';
import type { UsageDesk } from '../usage/usage-desk.js';
import { checkSessionOptions, POLICY_PRINCIPAL } from '../policy/policy-gate.js';
import type { SpawnPolicy } from '../../core/policy/hook.js';
import type { ProxiedClient, SessionsElsewhere } from './sessions-elsewhere.js';
import { FleetFeed } from './fleet-feed.js';
import { needsYou } from './needs-you.js';
import { newestFirst, type InboxItem } from '../../core/protocol/inbox.js';

export interface DirectoryLimits extends SessionLimits {
  /** How long a session waits for its lost agent before it is ended. */
  agentLostTimeoutMs: number;
  /** How long an ended session stays listed (history readable) before it is dropped. */
  endedRetentionMs: number;
  /** Live sessions one principal may own at once. */
  maxSessionsPerPrincipal: number;
  /** How long a create or stop waits for an agent whose link dropped (each time it drops). */
  agentWaitMs: number;
}

/**
 * The gateway's registry of agents, sessions and clients, and the visibility rule: a session
 * that exists but is not yours answers exactly like one that does not exist. Its indexes are
 * its own: other modules go through the methods below, which keep them in step (a session
 * removed is gone from every index, its timer included; a client removed is gone from both
 * of its own).
 */
export class SessionDirectory {
  private readonly agents = new Map<string, AgentLink>();
  private readonly sessions = new Map<string, Session>();
  /** Connected clients' principals by client id (for role changes), local and other gateways'. */
  private readonly clients = new Map<string, Principal>();
  /** This gateway's connected clients that can be cut (a session of theirs moved to another gateway). */
  private readonly links = new Map<string, ProxiedClient>();
  /** The one timer a session has here, by id: waiting for its lost agent, or until an ended one is dropped. */
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Agents whose link dropped, and waits for them to come back. */
  readonly waits: AgentWaits;
  private readonly creates: PendingCreates;
  /** The central policy in force. */
  readonly policy: PolicyProvider;
  /** Whether engines are started with the policy's hook (the gateway was given a policy). */
  private readonly policyHook: boolean;
  /** Sessions and agents on the other gateways of a cluster (gateway/cluster/); none outside one. */
  elsewhere: SessionsElsewhere | undefined;
  /** The gateway's tracer while tracing is on (core/telemetry/); none: off. */
  tracer: Tracer | undefined;
  /** The trace of the client input being applied, for the `agent.input` it sends (agent-link.ts). */
  readonly inputTrace = new TraceSlot();
  /** Tells watching clients (fleet.watch) when agents, sessions or what waits for someone changed. */
  readonly feed = new FleetFeed();
  /** Where sessions tell what a person away from the tab may need (gateway/attention/); none: told nowhere. */
  notices: NoticeSink | undefined;
  /** A person follows a session or stops (set by the attention room); none: notifications are off. */
  follow: ((principal: string, sessionId: string, on: boolean) => void) | undefined;
  /** Handed to every session: reads {@link notices} when told, so it may be set after sessions were restored. */
  private readonly noticeSink: NoticeSink = (id, n) => this.notices?.(id, n);

  constructor(
    private readonly limits: DirectoryLimits,
    readonly log: Logger,
    readonly audit: AuditLog,
    private readonly store: SessionStore,
    /** When what sessions append to `store` may be shown (the gateway's one Durability over it). */
    private readonly durability: Durability,
    /** Where sessions report prompts and gaps, and agent resumes are counted; none by default. */
    private readonly metrics?: GatewayMetrics,
    /** The central policy (gateway/policy/policy-source.ts); none: no rules, and engines get no policy hook. */
    policy?: PolicyProvider,
    /** The usage room (gateway/usage/): turns booked, prompts held to budgets; none: neither. */
    readonly usage?: UsageDesk,
  ) {
    this.waits = new AgentWaits((name) => this.agents.get(name), limits.agentLostTimeoutMs);
    this.creates = new PendingCreates(this, limits.agentWaitMs, log);
    this.policy = policy ?? new StaticPolicy();
    this.policyHook = policy !== undefined;
    for (const stored of store.loadAll()) this.restore(stored);
  }

  /**
   * A session another gateway of the cluster held, read back from the cluster's store: held
   * here from now on, waiting for its agent (whose hello brought it) like a restored one.
   */
  adopt(stored: StoredSession): void {
    if (this.sessions.has(stored.record.id)) return;
    this.restore(stored);
  }

  /**
   * Lets go of a session another gateway now holds: forgotten here without ending it (its
   * engine runs on, its history stays in the cluster's store). Its clients here are cut by the caller.
   */
  release(id: string): Session | undefined {
    const s = this.sessions.get(id);
    if (s) this.remove(s);
    return s;
  }

  /** Takes a session out of every index: it is not found, listed, ended by a timer or dropped by one here any more. */
  private remove(s: Session): void {
    if (this.sessions.get(s.id) !== s) return;
    this.sessions.delete(s.id);
    s.onEnded = undefined;
    s.onChange = undefined;
    this.feed.changed();
    this.clearTimer(s.id);
  }

  private setTimer(id: string, ms: number, fire: () => void): void {
    this.clearTimer(id);
    const t = setTimeout(() => {
      this.timers.delete(id);
      fire();
    }, ms);
    t.unref();
    this.timers.set(id, t);
  }

  private clearTimer(id: string): void {
    clearTimeout(this.timers.get(id));
    this.timers.delete(id);
  }

  /** The connected agent of that name; undefined when none is (one waited for included). */
  agent(name: string): AgentLink | undefined {
    return this.agents.get(name);
  }

  /** The agents connected now. */
  agentList(): AgentLink[] {
    return [...this.agents.values()];
  }

  /** The sessions held here now, ended ones still listed included. */
  sessionList(): Session[] {
    return [...this.sessions.values()];
  }

  /** Ids of the sessions this agent runs that have not ended. */
  liveSessionIdsOf(agent: string): string[] {
    return this.sessionList()
      .filter((s) => s.agent === agent && !s.ended)
      .map((s) => s.id);
  }

  /**
   * A client connected (to this gateway, or to another one of the cluster calling here): its
   * principal decides whether it may be handed control; `link`, for this gateway's own, lets
   * it be cut when a session of it moves. Removed with removeClient.
   */
  addClient(clientId: string, principal: Principal, link?: ProxiedClient): void {
    this.clients.set(clientId, principal);
    if (link) this.links.set(clientId, link);
  }

  /** A client left: gone from every index. Idempotent. */
  removeClient(clientId: string): void {
    this.clients.delete(clientId);
    this.links.delete(clientId);
  }

  /** Clients known here now. */
  get clientCount(): number {
    return this.clients.size;
  }

  /** Closes this gateway's connection of that client so it resumes elsewhere; nothing for another gateway's. */
  cutClient(clientId: string, reason: string): void {
    this.links.get(clientId)?.cut(reason);
  }

  /**
   * The control requests an agent's owner allows beyond the safe ones, as its hello announced
   * (also while the gateway waits for it to come back); none for an agent it does not know.
   */
  controlAllowance(agent: string): EngineControlAllowance {
    const descriptor = this.agents.get(agent)?.descriptor ?? this.waits.awaited(agent)?.descriptor;
    return { allowControls: descriptor?.allow_engine_controls ?? [] };
  }

  /** This gateway's agents, and the cluster's when in one. */
  listAllAgents(p: Principal): Promise<AgentInfo[]> {
    const local = this.listAgents(p);
    return this.elsewhere ? this.elsewhere.listAgents(p, local) : Promise.resolve(local);
  }

  /** This gateway's sessions, and the cluster's when in one. */
  listAllSessions(p: Principal): Promise<SessionInfo[]> {
    const local = this.listSessions(p);
    return this.elsewhere ? this.elsewhere.listSessions(p, local) : Promise.resolve(local);
  }

  /** A session read back after a restart waits for its agent, bounded like a lost agent. */
  private restore(stored: StoredSession): void {
    const r = stored.record;
    const session = new Session({
      id: r.id,
      agent: r.agent,
      engine: r.engine,
      owner: r.owner,
      options: r.options,
      host: undefined,
      limits: this.limits,
      logger: this.log.child({ sessionId: r.id, agent: r.agent }),
      audit: this.audit,
      store: this.store,
      durability: this.durability,
      metrics: this.metrics,
      restored: stored,
      policy: this.policy,
      usage: this.usage,
      notices: this.noticeSink,
    });
    session.onEnded = () => this.scheduleDrop(session);
    this.listed(session);
    if (session.ended) this.scheduleDrop(session);
    else this.startLostTimer(session);
    this.log.info({ sessionId: r.id, agent: r.agent, frames: stored.frames.length }, 'session restored from the store');
  }

  private startLostTimer(s: Session): void {
    const wait = this.limits.agentLostTimeoutMs;
    this.setTimer(s.id, wait, () =>
      this.endSession(
        s,
        `the agent was away longer than the gateway keeps a session waiting (${wait} ms, limits.agentLostTimeoutMs; away since ${s.agentAwaySince ?? 'unknown'})`,
      ),
    );
  }

  /** How long a create or stop waits for an agent whose link dropped. */
  get agentWaitMs(): number {
    return this.limits.agentWaitMs;
  }

  /** Whether `sub` is a principal this gateway knows: a connected client's, or a session owner's (a session may be handed to it). */
  knowsPrincipal(sub: string): boolean {
    for (const p of this.clients.values()) if (p.sub === sub) return true;
    for (const s of this.sessions.values()) if (s.owner === sub) return true;
    return false;
  }

  /** Whether the client with this id may take control (its token allows it). */
  mayControl(clientId: string): boolean {
    return this.clients.get(clientId)?.canControl ?? false;
  }

  listAgents(p: Principal): AgentInfo[] {
    return [...this.agents.values()].filter((a) => p.canAdmin || mayUseAgent(p, a.name)).map((a) => a.info());
  }

  listSessions(p: Principal): SessionInfo[] {
    return [...this.sessions.values()].filter((s) => this.canSee(p, s)).map((s) => this.withOwnerName(s.info()));
  }

  /** `info` with the owner's display name: the session's own (its owner attached or created it), else a connected client's of theirs. */
  withOwnerName(info: SessionInfo): SessionInfo {
    if (info.owner_name !== undefined) return info;
    const name = this.nameOf(info.owner);
    return name === undefined ? info : { ...info, owner_name: name };
  }

  /** The display name of `sub` from the identity provider, as a connected client of theirs brought it; undefined when none did. */
  nameOf(sub: string): string | undefined {
    for (const p of this.clients.values()) if (p.sub === sub && p.name !== undefined) return p.name;
    return undefined;
  }

  /** What waits for `p` among the sessions held here (not ordered: see needs-you.ts). */
  needsYou(p: Principal): InboxItem[] {
    return needsYou(
      p,
      [...this.sessions.values()].filter((s) => this.canSee(p, s)),
      (sub) => this.nameOf(sub),
    );
  }

  /** What waits for `p` here and, in a cluster, on every other gateway: newest first. */
  async listAllNeeds(p: Principal): Promise<InboxItem[]> {
    const local = this.needsYou(p);
    return newestFirst(this.elsewhere ? await this.elsewhere.listNeeds(p, local) : local);
  }

  /** The session if this principal may see it; NOT_FOUND otherwise (no existence oracle). */
  visible(p: Principal, id: string): Session {
    const s = this.sessions.get(id);
    if (!s || !this.canSee(p, s)) throw new TetherError('NOT_FOUND', `no session ${id}`);
    return s;
  }

  /**
   * For links that reach only the sessions held here (the JSON-RPC dialect): as `visible`, but
   * a session another gateway of the cluster holds is refused FAILED_PRECONDITION naming it.
   */
  visibleHere(p: Principal, id: string): Session {
    const home = this.sessions.has(id) ? undefined : this.elsewhere?.holderOf(id, p);
    if (home)
      throw new TetherError(
        'FAILED_PRECONDITION',
        `session ${id} is held by gateway ${home} of this cluster; this connection reaches only the sessions held by the gateway it connects to`,
        { gateway: home },
      );
    return this.visible(p, id);
  }

  get(id: string): Session | undefined {
    return this.sessions.get(id);
  }

  /** By the token's scopes only: the owner's `sub` with a token scoped to other agents does not see it. */
  private canSee(p: Principal, s: Session): boolean {
    return p.canAdmin || mayUseAgent(p, s.agent);
  }

  /**
   * Creates a session on an agent and waits until its engine is up: across the agent's link
   * dropping (bounded), and joining an earlier create under the same `createId`.
   */
  create(
    p: Principal,
    agentName: string,
    engine: EngineKind | undefined,
    options: SessionOptions,
    id: string,
    extra: Pick<CreateRequest, 'createId' | 'onProgress' | 'trace'> = {},
  ): Promise<Session> {
    try {
      assertSessionOptionsBounded(options); // every path to a new session comes here: native, dialect, ACP, other gateways
    } catch (err) {
      return Promise.reject(err);
    }
    return this.creates.create(p, { agent: agentName, engine, options, ...extra }, id);
  }

  /** For PendingCreates: refuses an agent this principal may not use, and sessions over its quota. */
  checkMayCreate(p: Principal, agentName: string): void {
    if (!mayUseAgent(p, agentName)) throw new TetherError('NOT_FOUND', `no agent named "${agentName}" is connected`);
    const owned = [...this.sessions.values()].filter((s) => s.owner === p.sub && !s.ended).length;
    if (owned >= this.limits.maxSessionsPerPrincipal) {
      throw new TetherError(
        'RESOURCE_EXHAUSTED',
        `${p.sub} already owns ${owned} live sessions (limit ${this.limits.maxSessionsPerPrincipal}); stop one first`,
      );
    }
  }

  /** For PendingCreates: a new session in state `starting`, registered and audited. */
  open(p: Principal, agentName: string, kind: EngineKind, options: SessionOptions, id: string): Session {
    // Recorded before anything exists: a session whose creation cannot be audited is not made.
    const created = createdEntry(p.sub, agentName, kind, options, id);
    try {
      options = checkSessionOptions(this.policy.current, agentName, options, { ...p, role: 'owner' });
    } catch (err) {
      recordQuietly(
        this.audit,
        { ...created, result: 'refused', code: failureCode(err), reason: (err as Error).message, decided_by: POLICY_PRINCIPAL },
        this.log,
      );
      throw err;
    }
    recordOrRefuse(this.audit, { ...created, options }, this.log);
    const session = new Session({
      id,
      agent: agentName,
      engine: kind,
      owner: p.sub,
      ownerName: p.name,
      options,
      host: undefined,
      limits: this.limits,
      logger: this.log.child({ sessionId: id, agent: agentName }),
      audit: this.audit,
      store: this.store,
      durability: this.durability,
      metrics: this.metrics,
      policy: this.policy,
      usage: this.usage,
      notices: this.noticeSink,
    });
    session.onEnded = () => this.scheduleDrop(session);
    this.listed(session);
    return session;
  }

  /** A session held here from now on: indexed, and every change to what a listing shows of it told to the feed. */
  private listed(s: Session): void {
    this.sessions.set(s.id, s);
    s.onChange = () => this.feed.changed();
    this.feed.changed();
  }

  /** For PendingCreates: the policy's hook (when the gateway has a policy, or the session asks for a turn approval) and this agent's folders. */
  spawnPolicy(agent: string, options?: SessionOptions): SpawnPolicy {
    const turnApproval = options?.turn_approval !== undefined && options.turn_approval !== 'anyController';
    return { hook: this.policyHook || turnApproval, roots: this.policy.current.rootsFor(agent) };
  }

  /** For PendingCreates: forgets a session whose engine was not bound (audited as failed), and stops that engine if it runs. */
  abandon(s: Session, reason: string, err: unknown): void {
    recordQuietly(
      this.audit,
      { ...createdEntry(s.owner, s.agent, s.engine, s.options, s.id), result: 'failed', code: failureCode(err) },
      this.log,
    );
    // Never started: nothing of it is kept, so it cannot come back after a restart.
    this.remove(s);
    s.end();
    s.dispose();
    this.store.drop(s.id);
    const link = this.agents.get(s.agent);
    // An engine that started after all (e.g. the spawn timed out here) is stopped; an agent away
    // now is told when it comes back (its hello lists an engine no session here knows).
    link?.stop(s.id, reason).catch(() => {});
  }

  /**
   * An agent finished its hello: register it and re-bind the sessions it still runs. A live
   * agent of the same name is superseded when the new link is the same identity (same
   * principal sub: e.g. it reconnected before its old link was found dead), which is closed
   * with ABORTED; another identity is refused with ALREADY_EXISTS, never a silent takeover.
   * All or nothing: if anything after the listing fails, the agent is unlisted again and the
   * hello fails with UNAVAILABLE (retryable).
   */
  agentUp(link: AgentLink): void {
    this.admitAgent(link);
    try {
      this.bindAgentSessions(link);
    } catch (err) {
      this.agentDown(link); // all or nothing: a hello that fails leaves no agent listed
      // Our failure, not the agent's: UNAVAILABLE, so it retries instead of giving up (and exiting).
      throw err instanceof TetherError
        ? err
        : new TetherError('UNAVAILABLE', `the gateway could not register agent "${link.name}": ${(err as Error).message}`);
    }
  }

  /** Checks the name is free for this identity (superseding its own older link) and lists the agent. */
  private admitAgent(link: AgentLink): void {
    const existing = this.agents.get(link.name);
    if (existing) {
      if (existing.principal.sub !== link.principal.sub) {
        throw new TetherError(
          'ALREADY_EXISTS',
          `an agent named "${link.name}" is already connected with another identity; refusing a second registration`,
        );
      }
      this.log.info({ agent: link.name, principal: link.principal.sub }, 'agent superseded by a new connection of the same identity');
      this.agentDown(existing);
      existing.peer.channel.close('ABORTED', 'superseded by a new connection');
    }
    this.agents.set(link.name, link);
    this.feed.changed();
  }

  /**
   * Re-binds the sessions the agent still runs, resumes the engines of those it came back
   * without (gateway/directory/engine-resume.ts), and stops
   * engines nobody here knows. Each session is handled on its own: one that fails is ended
   * (logged) and the others, and the agent, carry on.
   */
  private bindAgentSessions(link: AgentLink): void {
    const running = new Map(link.descriptor.sessions.map((s) => [s.session_id, s.last_input_seq]));
    for (const s of this.sessions.values()) {
      if (s.agent !== link.name || s.ended || this.creates.isStarting(s.id)) continue; // a create in flight binds its own
      if (running.has(s.id)) {
        this.clearTimer(s.id);
        try {
          s.bindHost(link, running.get(s.id));
        } catch (err) {
          this.log.error({ sessionId: s.id, agent: link.name, err: (err as Error).message }, 'session could not be re-bound; ending it');
          this.endSession(s, `could not be re-bound to its agent: ${(err as Error).message}`);
          continue;
        }
        this.metrics?.resumed('agent');
      } else if (s.currentState === 'agent-lost') {
        this.clearTimer(s.id);
        // After the hello's answer, which the agent reads before any request of ours.
        setImmediate(() =>
          resumeEngine(link, s, {
            spawnPolicy: (a) => this.spawnPolicy(a),
            isCurrent: (l) => this.agents.get(l.name) === l,
            log: this.log,
          }),
        );
      }
    }
    // Engines this gateway knows nothing of (its memory was lost, or the session ended and was
    // dropped): nobody can reach them, so they are stopped rather than left running.
    for (const id of running.keys()) {
      const s = this.sessions.get(id);
      if (s && s.agent === link.name && !s.ended) continue;
      this.log.warn({ sessionId: id, agent: link.name }, 'stopping an engine no session here knows');
      link.stop(id, 'unknown to the gateway').catch(() => {});
    }
    this.waits.up(link);
  }

  /** The agent's link closed: its sessions wait for it, bounded by agentLostTimeoutMs. */
  agentDown(link: AgentLink): void {
    if (this.agents.get(link.name) !== link) return;
    this.agents.delete(link.name);
    this.feed.changed();
    link.dispose();
    this.waits.down(link);
    for (const s of this.sessions.values()) {
      if (s.agent !== link.name || s.ended || this.creates.isStarting(s.id)) continue; // a create in flight waits by itself
      s.bindHost(undefined);
      this.startLostTimer(s);
    }
  }

  private endSession(s: Session, reason: string): void {
    this.clearTimer(s.id);
    if (s.ended) return;
    s.onEngineEvent(s.nextAgentSeq, tetherEvent({ subtype: 'exited', code: null, signal: null, stderr_tail: '', reason }));
  }

  /** Ended sessions stay listed for a while, then go (unless removed meanwhile, e.g. released to another gateway). */
  private scheduleDrop(s: Session): void {
    this.setTimer(s.id, this.limits.endedRetentionMs, () => {
      this.remove(s);
      s.dispose();
      this.store.drop(s.id);
    });
  }

  dispose(): void {
    this.waits.dispose();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }
}

/** The audit entry of a create (its failure adds `result` and `code`). */
function createdEntry(owner: string, agent: string, engine: EngineKind, options: SessionOptions, id: string) {
  return { session_id: id, principal: owner, action: 'create' as const, agent, engine, options };
}

function mayUseAgent(p: Principal, agent: string): boolean {
  return p.agents === undefined || p.agents.includes(agent);
}
