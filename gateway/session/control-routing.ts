import { TetherError } from '../../core/errors.js';
import { BoundedMap } from '../../core/util/bounded-map.js';

/** Replies held for clients that are reconnecting (per client, and clients per session). */
const MAX_HELD_REPLIES = 256;
/** Client control requests in flight to one engine; more are refused until some are answered. */
export const MAX_IN_FLIGHT = 256;

/** How long the engine may take to answer a client's control request, unless controlAnswerMs says otherwise. */
export const DEFAULT_CONTROL_ANSWER_MS = 30_000;

/** Watches that the engine answers control requests in time. */
export interface ControlWatch {
  /** How long the engine may take to answer one control request. */
  answerWithinMs: number;
  /**
   * A request went unanswered past the bound. Returns false when it should not count now
   * (e.g. the agent is away, so the engine cannot answer): the request is watched again.
   */
  onOverdue(subtype: string, waitedMs: number): boolean;
  /** Every overdue request was answered (or dropped): the engine answers again. */
  onCaughtUp(): void;
}

interface InFlight {
  clientId: string;
  principal: string;
  origId: unknown;
  subtype: string;
  sentAt: number;
  timer?: NodeJS.Timeout;
  overdue?: boolean;
}

/** Where an engine answer goes: to a client now, or held for one that is reconnecting. */
export type ReplyRoute = { kind: 'deliver'; clientId: string; line: string } | { kind: 'held' } | { kind: 'not-ours' };

/**
 * Keeps clients' control requests apart on their way to one engine: each gets a gateway
 * request id (`tether-N`), and the engine's answer goes back to the one client that asked,
 * with its own id restored. Answers for a client that is away are held (bounded) until it
 * re-attaches under a new client id.
 */
export class ControlRouting {
  private readonly inFlight = new Map<string, InFlight>();
  private readonly held = new BoundedMap<string, { principal: string; lines: string[] }>(MAX_HELD_REPLIES);
  private next = 1;
  private overdueCount = 0;

  /** With `watch`, every request is timed until the engine answers it. */
  constructor(private readonly watch?: ControlWatch) {}

  /** Requests the engine left unanswered past the bound, still unanswered. */
  get overdue(): number {
    return this.overdueCount;
  }

  /** The gateway id to send in place of the client's `request_id`. */
  open(clientId: string, principal: string, origId: unknown, subtype = 'unknown'): string {
    if (this.inFlight.size >= MAX_IN_FLIGHT) {
      throw new TetherError(
        'RESOURCE_EXHAUSTED',
        `${MAX_IN_FLIGHT} control requests are already waiting for the engine; retry when some are answered`,
      );
    }
    const gwId = `tether-${this.next++}`;
    const m: InFlight = { clientId, principal, origId, subtype, sentAt: Date.now() };
    this.inFlight.set(gwId, m);
    this.arm(m);
    return gwId;
  }

  private arm(m: InFlight): void {
    const watch = this.watch;
    if (!watch || !(watch.answerWithinMs > 0)) return;
    m.timer = setTimeout(() => {
      if (!watch.onOverdue(m.subtype, Date.now() - m.sentAt)) return this.arm(m);
      m.overdue = true;
      this.overdueCount++;
    }, watch.answerWithinMs);
    m.timer.unref();
  }

  /** Stops timing a request that was answered or dropped. */
  private settle(gwId: string, m: InFlight): void {
    this.inFlight.delete(gwId);
    clearTimeout(m.timer);
    if (m.overdue && --this.overdueCount === 0) this.watch?.onCaughtUp();
  }

  /** Drops a request that never reached the engine. */
  forget(gwId: string): void {
    const m = this.inFlight.get(gwId);
    if (m) this.settle(gwId, m);
  }

  /** The gateway id of this client's own request `origId`; NOT_FOUND when it has none pending. */
  idOf(clientId: string, origId: unknown): string {
    for (const [gwId, m] of this.inFlight) if (m.clientId === clientId && m.origId === origId) return gwId;
    throw new TetherError('NOT_FOUND', `no control request ${JSON.stringify(origId)} of yours is pending`);
  }

  /**
   * Routes an engine control_response; `isAttached` says whether its asker is here now;
   * `rewrite` may change the answer to a request of that subtype (delivered or held alike).
   */
  answer(
    gwId: string,
    line: string,
    isAttached: (clientId: string) => boolean,
    rewrite: (subtype: string, line: string) => string = (_, l) => l,
  ): ReplyRoute {
    const m = this.inFlight.get(gwId);
    if (!m) return { kind: 'not-ours' };
    this.settle(gwId, m);
    const reply = rewrite(m.subtype, restoreRequestId(line, gwId, m.origId));
    if (isAttached(m.clientId)) return { kind: 'deliver', clientId: m.clientId, line: reply };
    const held = this.held.get(m.clientId) ?? { principal: m.principal, lines: [] };
    if (held.lines.length < MAX_HELD_REPLIES) held.lines.push(reply);
    this.held.set(m.clientId, held);
    return { kind: 'held' };
  }

  /**
   * A client came back under a new client id: its requests in flight follow it, and the
   * answers held for it are returned (only for the same principal).
   */
  takeOver(previousClientId: string, clientId: string, principal: string): string[] {
    for (const m of this.inFlight.values()) if (m.clientId === previousClientId && m.principal === principal) m.clientId = clientId;
    const held = this.held.get(previousClientId);
    if (!held || held.principal !== principal) return [];
    this.held.delete(previousClientId);
    return held.lines;
  }

  clear(): void {
    for (const m of this.inFlight.values()) clearTimeout(m.timer);
    this.overdueCount = 0;
    this.inFlight.clear();
    this.held.clear();
  }
}

/**
 * Puts the client's own request id back into the engine's answer. Edits the text in place so
 * the rest of the line stays byte for byte as the engine wrote it; falls back to a re-parse
 * only when the id must be removed (the client sent none).
 */
export function restoreRequestId(line: string, gwId: string, origId: unknown): string {
  const needle = `"request_id":${JSON.stringify(gwId)}`;
  const at = line.indexOf(needle);
  if (origId !== undefined && at >= 0) return line.slice(0, at) + `"request_id":${JSON.stringify(origId)}` + line.slice(at + needle.length);
  const value = JSON.parse(line) as { response?: Record<string, unknown> };
  if (value.response) {
    if (origId === undefined) delete value.response.request_id;
    else value.response.request_id = origId;
  }
  return JSON.stringify(value);
}
