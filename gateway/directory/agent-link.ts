import { TetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';
import type { RpcPeer } from '../../core/rpc/peer.js';
import { agentInputText, type AgentDescriptor, type AgentInfo, type ParamsOf, type StopSignal } from '../../core/protocol/methods.js';
import type { EngineKind, SessionOptions } from '../../core/protocol/session-options.js';
import { SPAWN_WAIT_MS } from '../../core/timeouts.js';
import type { SpawnPolicy } from '../../core/policy/hook.js';
import type { Principal } from '../door/principal.js';
import type { Durability, EngineHost, Session } from '../session/session.js';
import type { GatewayMetrics } from '../metrics.js';
import type { TraceContext } from '../../core/protocol/trace-context.js';
import type { TraceSlot, Tracer } from '../../core/telemetry/tracer.js';

/**
 * Acks are cumulative and batched: once this many frames (or ACK_EVERY_BYTES of them) are
 * unacked, at the end of the turn of the event loop that read them (one ack per session for a
 * whole burst); else after ACK_AFTER_MS.
 */
const ACK_EVERY_FRAMES = 32;
/**
 * Large lines are acked sooner: the agent holds each line until its ack, and a line held long
 * enough to outlive two young-generation collections there is only freed by a full one (32
 * frames of 100 KB were 3 MB in flight per session).
 */
const ACK_EVERY_BYTES = 512 * 1024;
export const ACK_AFTER_MS = 100;

/** How long the gateway waits for an agent to answer agent.stop: its staged engine stop (stdin closed, SIGTERM, SIGKILL; 10 s by default) and a margin. */
export const AGENT_STOP_ANSWER_MS = 20_000;

/** The sessions an agent link reaches (the directory's). */
export interface LinkSessions {
  get(id: string): Session | undefined;
  /** Ids of the sessions this agent runs that have not ended. */
  liveSessionIdsOf(agent: string): string[];
  /** The gateway's tracer while tracing is on. */
  readonly tracer?: Tracer;
  /** The trace of the client input being applied now, carried on to the agent. */
  readonly inputTrace?: TraceSlot;
}

/**
 * One connected agent as the gateway sees it: the engine host for its sessions. Translates
 * the agent's notifications into session calls and session calls into agent requests.
 */
export class AgentLink implements EngineHost {
  readonly connectedAt = new Date().toISOString();
  /** Output not acked yet, per session: the last seq, how many frames and bytes, since when (epoch ms). */
  private readonly unacked = new Map<string, { seq: number; count: number; bytes: number; since: number }>();
  private ackTimer: NodeJS.Timeout | undefined;
  /** An ack flush is queued for the end of this turn. */
  private flushQueued = false;
  private disposed = false;

  constructor(
    readonly descriptor: AgentDescriptor,
    readonly peer: RpcPeer,
    private readonly sessions: LinkSessions,
    private readonly log: Logger,
    /** Who authenticated this link; a later link of the same `sub` supersedes it. */
    readonly principal: Principal,
    /** When acks may go to the agent and inputs to the engine: the gateway's one answer over its store. */
    private readonly durability: Durability,
    private readonly metrics?: GatewayMetrics,
    /** The agent takes output acks folded into agent.input (capability acks.folded.v1). */
    private readonly foldAcks = false,
  ) {
    peer.onBinaryNotification('session.output', (p, body) => {
      const s = this.sessions.get(p.session_id);
      if (this.disposed) return;
      if (p.input_ack !== undefined) this.onInputAck(p.session_id, p.input_ack);
      // The first line of a group the agent read at once carries the group's trace: one span per group here too.
      const span =
        p.trace &&
        this.sessions.tracer?.start(
          'tether.gateway.output',
          p.trace,
          { 'tether.session_id': p.session_id, 'tether.seq': p.seq, 'tether.line.type': p.meta.type, 'tether.line.bytes': body.byteLength },
          'consumer',
        );
      // Output of a session nobody here knows is acked anyway, so the agent can let it go.
      if (s && s.agent === this.name && s.onEngineLine(p.seq, body, p.meta, p.read_at_ms)) {
        this.metrics?.relayed('from_agent', body.byteLength);
      }
      span?.end();
      this.noteForAck(p.session_id, p.seq, body.byteLength);
    });
    peer.onNotification('session.input_ack', (p) => this.onInputAck(p.session_id, p.seq));
    peer.onNotification('session.event', (p) => {
      const s = this.sessions.get(p.session_id);
      if (this.disposed) return;
      if (p.input_ack !== undefined) this.onInputAck(p.session_id, p.input_ack);
      if (s && s.agent === this.name && s.onEngineEvent(p.seq, p.event))
        this.metrics?.relayed('from_agent', Buffer.byteLength(JSON.stringify(p.event)));
      this.noteForAck(p.session_id, p.seq, 0);
    });
  }

  get name(): string {
    return this.descriptor.name;
  }

  info(): AgentInfo {
    const mine = this.sessions.liveSessionIdsOf(this.name);
    return {
      name: this.name,
      host: this.descriptor.host,
      engines: this.descriptor.engines,
      default_engine: this.descriptor.default_engine,
      labels: this.descriptor.labels,
      engine_versions: this.descriptor.engine_versions,
      ...(this.descriptor.allows_bypass_permissions === undefined
        ? {}
        : { allows_bypass_permissions: this.descriptor.allows_bypass_permissions }),
      sessions: mine,
      connected_at: this.connectedAt,
      transport: this.peer.channel.transport,
    };
  }

  /**
   * Starts a session's engine; `continueAt`: a new engine for a session that had one (its
   * agent restarted: gateway/directory/engine-resume.ts; or it moved: session-move.ts, which
   * also hands over the `transcript`).
   */
  spawn(
    sessionId: string,
    engine: EngineKind,
    options: SessionOptions,
    policy: SpawnPolicy = {},
    continueAt?: ParamsOf<'agent.spawn'>['continue_at'],
    transcript?: ParamsOf<'agent.spawn'>['transcript'],
    /** The create's trace (tracing on): the engine's TRACEPARENT. */
    trace?: TraceContext,
  ) {
    const params = {
      session_id: sessionId,
      engine,
      options,
      ...(policy.hook ? { policy_hook: true } : {}),
      ...(policy.roots ? { policy_roots: policy.roots } : {}),
      ...(continueAt ? { continue_at: continueAt } : {}),
      ...(transcript ? { transcript } : {}),
      ...(trace ? { trace } : {}),
    };
    return this.peer.request('agent.spawn', params, { timeoutMs: SPAWN_WAIT_MS });
  }

  /**
   * Sends one input once Durability says it may be shown (the file store wrote it before this
   * is called): a gateway killed right after cannot leave the engine with an input its
   * successor does not know, and would apply again when the client retries. Inputs leave in
   * order. The session's output ack rides along when the agent takes it and it may be acked
   * now; otherwise it follows on its own once it may. Throws INVALID_ARGUMENT, having sent
   * nothing, when the line cannot be serialized.
   */
  input(sessionId: string, seq: number, line: Record<string, unknown>, text?: string): void {
    let lineText: string;
    try {
      lineText = text ?? JSON.stringify(line);
    } catch (err) {
      throw new TetherError('INVALID_ARGUMENT', `input ${seq} cannot be sent to the agent: ${(err as Error).message}`);
    }
    const ack = this.foldAcks ? this.takeOwedAck(sessionId) : undefined;
    const trace = this.sessions.inputTrace?.current; // the client's input this is (tracing on), taken before the wait
    this.durability.mayShow(() => {
      // Posted (no promise per input); a closed link keeps it pending, re-sent after the agent's next hello.
      if (!this.peer.post(agentInputText({ session_id: sessionId, seq, ack, trace }, lineText)))
        this.log.warn({ sessionId, seq }, 'input not handed to the agent link');
    });
    this.metrics?.relayed('to_agent', Buffer.byteLength(lineText));
  }

  /**
   * The session's owed output ack, to fold into an input when what it covers is durable now;
   * when the store makes it durable later, it is sent on its own then. Never outruns the store.
   */
  private takeOwedAck(sessionId: string): number | undefined {
    const owed = this.unacked.get(sessionId);
    if (!owed) return undefined;
    this.acked(sessionId);
    let folded: number | undefined;
    let now = true;
    this.durability.mayAck(() => {
      if (now) folded = owed.seq;
      else this.peer.postNotification('session.ack', { session_id: sessionId, seq: owed.seq });
    });
    now = false;
    return folded;
  }

  /** Asks the agent to stop a session's engine; rejects DEADLINE_EXCEEDED past {@link AGENT_STOP_ANSWER_MS}. */
  async stop(sessionId: string, reason: string, signal?: StopSignal): Promise<void> {
    await this.peer.request('agent.stop', { session_id: sessionId, reason, signal }, { timeoutMs: AGENT_STOP_ANSWER_MS });
  }

  /** The agent wrote every input of the session up to `seq` (alone, or folded into its output). */
  private onInputAck(sessionId: string, seq: number): void {
    const s = this.sessions.get(sessionId);
    if (s && s.agent === this.name) s.onInputAck(seq);
  }

  private noteForAck(sessionId: string, seq: number, bytes: number): void {
    let u = this.unacked.get(sessionId);
    if (!u) this.unacked.set(sessionId, (u = { seq, count: 0, bytes: 0, since: Date.now() }));
    u.seq = seq;
    u.count++;
    u.bytes += bytes;
    if (u.count >= ACK_EVERY_FRAMES || u.bytes >= ACK_EVERY_BYTES) {
      if (!this.flushQueued) {
        this.flushQueued = true;
        process.nextTick(this.flushAtTurnEnd); // after the rest of the burst, which the same ack covers
      }
    } else if (!this.ackTimer) this.ackTimer = setTimeout(this.flushAged, ACK_AFTER_MS);
  }

  /**
   * The session's output ack went out folded into an input: nothing more owed for it. The
   * timer stays (it sends only acks owed ACK_AFTER_MS): clearing it here and setting it
   * again at the next output cost a timer per prompt round trip.
   */
  private acked(sessionId: string): void {
    this.unacked.delete(sessionId);
  }

  /** The timer: sends the acks owed for ACK_AFTER_MS, and runs again when the next one will be. */
  private readonly flushAged = (): void => {
    this.ackTimer = undefined;
    if (this.disposed) return;
    const now = Date.now();
    const due: { session_id: string; seq: number }[] = [];
    let next = Infinity;
    for (const [sessionId, u] of this.unacked) {
      const age = now - u.since;
      if (age >= ACK_AFTER_MS - 1) {
        due.push({ session_id: sessionId, seq: u.seq });
        this.unacked.delete(sessionId);
      } else next = Math.min(next, ACK_AFTER_MS - age);
    }
    if (next !== Infinity) this.ackTimer = setTimeout(this.flushAged, next);
    this.sendAcks(due);
  };

  /** Sends cumulative acks once what they cover is durable. */
  private sendAcks(acks: { session_id: string; seq: number }[]): void {
    if (!acks.length) return;
    this.durability.mayAck(() => {
      for (const ack of acks) this.peer.postNotification('session.ack', ack);
    });
  }

  private readonly flushAtTurnEnd = (): void => {
    this.flushQueued = false;
    if (!this.disposed) this.flushAcks();
  };

  /** Sends every pending cumulative ack once what it covers is durable. */
  flushAcks(): void {
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    const acks = [...this.unacked].map(([sessionId, u]) => ({ session_id: sessionId, seq: u.seq }));
    this.unacked.clear();
    this.sendAcks(acks);
  }

  /** Stops relaying: output and events arriving after this are dropped. Idempotent. */
  dispose(): void {
    this.disposed = true;
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
  }
}
