import { asTetherError, TetherError } from '../../core/errors.js';
import type { TraceContext } from '../../core/protocol/trace-context.js';
import type { SpawnPolicy } from '../../core/policy/hook.js';
import type { Logger } from '../../core/logging.js';
import type { CreateProgress } from '../../core/protocol/methods.js';
import type { EngineKind, SessionOptions } from '../../core/protocol/session-options.js';
import type { AgentLink } from './agent-link.js';
import type { AgentWaits } from './agent-waits.js';
import type { Principal } from '../door/principal.js';
import type { Session } from '../session/session.js';

/** Create ids remembered (per gateway; the oldest is forgotten first). */
const MAX_CREATE_IDS = 4096;
/** Spawn attempts of one create across link drops before it gives up. */
const MAX_SPAWN_ATTEMPTS = 20;

/** One session.create as the directory hands it over. */
export interface CreateRequest {
  agent: string;
  engine?: EngineKind;
  options: SessionOptions;
  /** The client's idempotency key (session.create's `create_id`). */
  createId?: string;
  /** Told each time the create waits (for the agent to come back). */
  onProgress?: (p: CreateProgress) => void;
  /** The create's trace (tracing on), carried to the agent's spawn. */
  trace?: TraceContext;
}

/** What creating needs from the session directory. */
export interface CreateHost {
  /** The connected agent of that name. */
  agent(name: string): AgentLink | undefined;
  readonly waits: AgentWaits;
  get(id: string): Session | undefined;
  /** Throws the typed error when `p` may not start a session on this agent now. */
  checkMayCreate(p: Principal, agent: string): void;
  /** Builds and registers a session in state `starting` (audited as created). */
  open(p: Principal, agent: string, engine: EngineKind, options: SessionOptions, id: string): Session;
  /** Ends and forgets a session whose engine was not bound; its engine, if one runs, is stopped. */
  abandon(s: Session, reason: string, err: unknown): void;
  /** What the central policy starts this agent's engines with (docs/policy.md). */
  spawnPolicy(agent: string, options?: SessionOptions): SpawnPolicy;
}

interface KnownCreate {
  agent: string;
  sessionId: string;
  done: Promise<void>;
  listeners: Set<(p: CreateProgress) => void>;
  last?: CreateProgress;
}

/**
 * Session creation that survives link loss, exactly once. A create for an agent whose link
 * dropped (within the agent-lost grace) waits for it, bounded by `waitMs` per wait. A spawn
 * cut off by a link drop is not retried blindly: the agent's next hello lists the engines it
 * runs, and a listed one is bound to the waiting create; an unlisted one never started, so
 * spawning again is safe. A create retried under the same `create_id` joins the first one and
 * gets the same session.
 */
export class PendingCreates {
  private readonly byKey = new Map<string, KnownCreate>();
  private readonly starting = new Set<string>();

  constructor(
    private readonly host: CreateHost,
    private readonly waitMs: number,
    private readonly log: Logger,
  ) {}

  /** Whether this session's engine is still being started (the directory leaves it alone then). */
  isStarting(id: string): boolean {
    return this.starting.has(id);
  }

  /** Starts a session (or joins the one started under the same create id) and resolves once its engine is bound. */
  async create(p: Principal, req: CreateRequest, newId: string): Promise<Session> {
    if (req.createId === undefined) return this.start(p, req, newId, req.onProgress);
    const key = `${p.sub}\u0000${req.createId}`;
    let known = this.byKey.get(key);
    if (known && known.agent !== req.agent) {
      throw new TetherError('INVALID_ARGUMENT', `create_id ${req.createId} was already used for a session on agent "${known.agent}"`);
    }
    if (!known) {
      const entry: KnownCreate = { agent: req.agent, sessionId: newId, done: Promise.resolve(), listeners: new Set() };
      const tell = (progress: CreateProgress) => {
        entry.last = progress;
        for (const l of entry.listeners) l(progress);
      };
      entry.done = this.start(p, req, newId, tell).then(
        () => undefined,
        (err: unknown) => {
          if (this.byKey.get(key) === entry) this.byKey.delete(key); // a retry may try again
          throw err;
        },
      );
      this.byKey.set(key, entry);
      if (this.byKey.size > MAX_CREATE_IDS) this.byKey.delete(this.byKey.keys().next().value as string);
      known = entry;
    } else {
      this.log.info({ sessionId: known.sessionId, agent: req.agent }, 'create retried with a known create_id: joining it');
    }
    const listener = req.onProgress;
    if (listener) {
      known.listeners.add(listener);
      if (known.last) listener(known.last);
    }
    try {
      await known.done;
    } finally {
      if (listener) known.listeners.delete(listener);
    }
    const session = this.host.get(known.sessionId);
    if (!session) throw new TetherError('NOT_FOUND', `the session of create_id ${req.createId} has ended and is no longer held`);
    return session;
  }

  private async start(p: Principal, req: CreateRequest, id: string, tell: ((p: CreateProgress) => void) | undefined): Promise<Session> {
    const live = this.host.agent(req.agent);
    const descriptor = live?.descriptor ?? this.host.waits.awaited(req.agent)?.descriptor;
    this.host.checkMayCreate(p, req.agent);
    if (!descriptor) throw new TetherError('NOT_FOUND', `no agent named "${req.agent}" is connected`);
    const kind = req.engine ?? descriptor.default_engine;
    checkEngine(req.agent, descriptor.engines, kind);
    const session = this.host.open(p, req.agent, kind, req.options, id);
    this.starting.add(id);
    try {
      await this.bindEngine(session, kind, session.options, tell, req.trace); // as the policy left them (e.g. its default model)
    } catch (err) {
      this.host.abandon(session, `its engine did not start: ${asTetherError(err).message}`, err);
      throw err;
    } finally {
      this.starting.delete(id);
    }
    this.log.info({ sessionId: id, agent: req.agent, engine: kind, owner: p.sub }, 'session started');
    return session;
  }

  /** Spawns (or finds, after a link drop) the session's engine and binds it. */
  private async bindEngine(
    session: Session,
    kind: EngineKind,
    options: SessionOptions,
    tell: ((p: CreateProgress) => void) | undefined,
    trace: TraceContext | undefined,
  ): Promise<void> {
    const name = session.agent;
    for (let attempt = 1; ; attempt++) {
      let link = this.host.agent(name);
      if (!link || link.peer.channel.isClosed) {
        const message = `waiting for agent "${name}" to come back (its link dropped); up to ${Math.round(this.waitMs / 1000)} s`;
        this.log.info({ sessionId: session.id, agent: name }, 'create waiting for its agent');
        tell?.({ session_id: session.id, agent: name, status: 'waiting_for_agent', message });
        link = await this.host.waits.linkOf(name, Date.now() + this.waitMs);
        checkEngine(name, link.descriptor.engines, kind);
      }
      // The agent's hello lists the engines it runs: one listed here was spawned before a link drop.
      const reported = link.descriptor.sessions.find((s) => s.session_id === session.id);
      if (reported) {
        this.log.info({ sessionId: session.id, agent: name }, 'the agent reported the engine of a waiting create: binding it');
        session.bindHost(link, reported.last_input_seq);
        return;
      }
      if (attempt > MAX_SPAWN_ATTEMPTS)
        throw new TetherError(
          'UNAVAILABLE',
          `agent "${name}" kept dropping its link while the engine started (${MAX_SPAWN_ATTEMPTS} attempts)`,
        );
      try {
        await link.spawn(session.id, kind, options, this.host.spawnPolicy(name, options), undefined, undefined, trace);
      } catch (err) {
        const e = asTetherError(err);
        // The agent already runs it: an earlier spawn got through on this very link.
        if (e.code === 'ALREADY_EXISTS' && this.isCurrent(link)) break;
        // The link dropped mid-spawn: the agent's next hello says whether the engine exists.
        if (!this.isCurrent(link)) continue;
        throw e;
      }
      // Spawned, but the link may have dropped since: then the next hello reports it.
      if (this.isCurrent(link)) break;
    }
    session.bindHost(this.host.agent(name));
  }

  private isCurrent(link: AgentLink): boolean {
    return this.host.agent(link.name) === link && !link.peer.channel.isClosed;
  }
}

function checkEngine(agent: string, engines: readonly EngineKind[], kind: EngineKind): void {
  if (!engines.includes(kind))
    throw new TetherError('FAILED_PRECONDITION', `agent "${agent}" cannot run engine "${kind}" (it has: ${engines.join(', ')})`);
}
