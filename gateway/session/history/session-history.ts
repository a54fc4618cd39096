import { gapEvent, type SessionState, type TetherEvent } from '../../../core/protocol/events.js';
import type { WorktreeInfo } from '../../../core/protocol/worktree.js';
import { frameBuffer, SessionFrameWriter, type FrameBytes, type FrameOrigin } from '../../../core/wire/session-frame.js';
import { ReplayLog, type ReplayLogLimits } from './replay-log.js';
import { DurableOutbox } from './durable-outbox.js';
import type { Durability } from './durability.js';
import type { SessionStore, StoredFrame } from '../session-store.js';

/**
 * What a frame says, before it is encoded: an engine line as the engine wrote it, a line the
 * gateway writes in the engine's format (a withdrawal), or a gateway event. Only this module
 * turns it into wire text (through `core/wire/session-frame.ts`), once for every client.
 */
export type FrameBody = { line: Uint8Array; origin: FrameOrigin } | { gatewayLine: Record<string, unknown> } | { event: TetherEvent };

/** What one stored frame tells a session restoring itself (see {@link factOf}). */
export type RestoredFact =
  | { kind: 'state'; state: SessionState; at?: string }
  | { kind: 'prompt'; requestId: string; subtype: string; request?: Record<string, unknown> }
  | { kind: 'withdrawn'; requestId: string }
  | { kind: 'engine_session'; engineSessionId: string }
  | { kind: 'owner'; owner: string }
  | { kind: 'moved'; agent: string; cwd?: string }
  | { kind: 'worktree'; worktree: WorktreeInfo }
  | { kind: 'title'; title: string }
  | { kind: 'prompted'; message: unknown }
  /** An engine `result`: its process's running cost total and turn count (the usage ledger's baseline). */
  | { kind: 'result'; totalCostUsd: number; resultIndex?: number };

/**
 * A session's ordered history: every frame numbered, appended to the store and the bounded
 * replay log, and handed to members once the store holds it. Also the agent's side of the
 * numbering: which agent seq was applied last, so output replayed after a reconnect is
 * applied once.
 */
export class SessionHistory {
  private readonly log: ReplayLog;
  /** Frames on their way to members, released once the store holds them. */
  private readonly outbox: DurableOutbox;
  private lastAgentSeq = 0;
  /** What holds frames back to coalesce them (presence): flushed before any other frame is numbered. */
  private held: { flush(): void } | undefined;
  /** Encodes this session's frames (its header start made once). */
  private readonly frames: SessionFrameWriter;

  /**
   * `deliver` hands one frame to every member attached at that moment, once `durability` says
   * it may be shown; `restored`: frames read back from the store after a restart (durable
   * already, so they are not written again).
   */
  constructor(
    private readonly sessionId: string,
    private readonly store: SessionStore,
    durability: Durability,
    limits: ReplayLogLimits,
    deliver: (bytes: FrameBytes, readAtMs?: number) => void,
    restored: readonly StoredFrame[] = [],
  ) {
    this.log = new ReplayLog(limits);
    this.frames = new SessionFrameWriter(sessionId);
    if (restored.length && restored[0].seq > 1) this.log.restartAt(restored[0].seq); // the store was compacted
    for (const f of restored) {
      this.log.append({ seq: f.seq, bytes: f.bytes });
      if (f.agentSeq !== undefined && f.agentSeq > this.lastAgentSeq) this.lastAgentSeq = f.agentSeq;
    }
    this.outbox = new DurableOutbox(durability, deliver, this.log.lastSeq);
  }

  get lastSeq(): number {
    return this.log.lastSeq;
  }

  /** The next output seq the gateway expects from the agent (for agent resume). */
  get nextAgentSeq(): number {
    return this.lastAgentSeq + 1;
  }

  /** Takes one agent output seq: false for one already applied (replayed after a reconnect). */
  acceptAgentSeq(agentSeq: number): boolean {
    if (agentSeq <= this.lastAgentSeq) return false;
    this.lastAgentSeq = agentSeq;
    return true;
  }

  /**
   * Registers what holds frames back to coalesce them (PresenceBatch). It is flushed before
   * any other frame is numbered, so the history keeps the order in which things happened.
   */
  holdBack(held: { flush(): void }): void {
    this.held = held;
  }

  /** Numbers one frame, stores it, keeps it for replay and queues it for every member. */
  append(body: FrameBody, readAtMs?: number): void {
    this.held?.flush();
    const seq = this.log.lastSeq + 1;
    const bytes =
      'event' in body
        ? this.frames.encodeEvent(seq, body.event)
        : 'line' in body
          ? this.frames.encodeLine(seq, body.origin, body.line)
          : this.frames.encodeLine(seq, 'gateway', Buffer.from(JSON.stringify(body.gatewayLine)));
    this.store.appendFrame(this.sessionId, { seq, agentSeq: this.lastAgentSeq, bytes });
    this.log.append({ seq, bytes });
    this.outbox.push(seq, bytes, readAtMs);
  }

  /**
   * Sends one new member the history from `from` that is durable now (frames still on their way
   * reach it with everyone's), after a gap notice when frames before the oldest held are asked
   * for. Returns whether there was a gap.
   */
  replayTo(send: (bytes: Buffer) => void, from: number): boolean {
    const first = this.log.firstSeq;
    const gap = from < first;
    if (gap) {
      send(this.frames.encodeEvent(0, gapEvent(from, first - 1)));
    }
    for (const entry of this.log.since(Math.max(from, first))) if (entry.seq <= this.outbox.releasedSeq) send(entry.bytes);
    return gap;
  }
}

/**
 * What a stored frame tells a restoring session about its state and pending prompts; undefined
 * for a frame that tells nothing (or that does not parse). Read once per frame at start only.
 */
export function factOf(frame: FrameBytes): RestoredFact | undefined {
  let params: {
    message?: {
      type?: string;
      subtype?: string;
      session_id?: string;
      title?: unknown;
      total_cost_usd?: unknown;
      result_index?: unknown;
      request_id?: string;
      request?: { subtype?: string } & Record<string, unknown>;
    };
    event?: TetherEvent;
    origin?: string;
  };
  try {
    params = (JSON.parse(frameBuffer(frame).toString('utf8')) as { params: typeof params }).params;
  } catch {
    return undefined;
  }
  if (params.event?.subtype === 'state') return { kind: 'state', state: params.event.state, at: params.event.at };
  if (params.event?.subtype === 'exited') return { kind: 'state', state: 'ended', at: params.event.at };
  if (params.event?.subtype === 'title_changed') return { kind: 'title', title: params.event.title };
  if (params.event?.subtype === 'prompt') return { kind: 'prompted', message: params.event.message };
  if (params.event?.subtype === 'owner_changed') return { kind: 'owner', owner: params.event.owner };
  if (params.event?.subtype === 'worktree') return { kind: 'worktree', worktree: params.event.worktree };
  if (params.event?.subtype === 'moved') return { kind: 'moved', agent: params.event.to_agent, cwd: params.event.cwd };
  const v = params.message;
  if (typeof v !== 'object' || v === null) return undefined;
  if (v.type === 'system' && v.subtype === 'session_title_changed' && typeof v.title === 'string') return { kind: 'title', title: v.title };
  if (v.type === 'system' && v.subtype === 'init' && typeof v.session_id === 'string')
    return { kind: 'engine_session', engineSessionId: v.session_id.slice(0, 256) };
  if (v.type === 'result' && typeof v.total_cost_usd === 'number')
    return { kind: 'result', totalCostUsd: v.total_cost_usd, resultIndex: typeof v.result_index === 'number' ? v.result_index : undefined };
  if (typeof v.request_id !== 'string') return undefined;
  if (v.type === 'control_request' && params.origin === 'engine')
    return { kind: 'prompt', requestId: v.request_id, subtype: v.request?.subtype ?? 'unknown', request: v.request };
  if (v.type === 'control_cancel_request') return { kind: 'withdrawn', requestId: v.request_id };
  return undefined;
}
