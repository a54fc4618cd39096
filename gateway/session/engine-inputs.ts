import type { StopSignal } from '../../core/protocol/methods.js';
import type { Logger } from '../../core/logging.js';
import { checkEngineInput } from '../../core/protocol/engine-input.js';
import { PendingInputs } from './pending-inputs.js';
import type { SessionStore, StoredInput } from './session-store.js';
import { BoundedMap } from '../../core/util/bounded-map.js';

/** The engine side of a session as the gateway sees it (the agent link). */
export interface EngineHost {
  /** Sends one input; `text`: the line as `JSON.stringify` writes it, when the caller has it already. */
  input(sessionId: string, seq: number, line: Record<string, unknown>, text?: string): void;
  stop(sessionId: string, reason: string, signal?: StopSignal): Promise<void>;
}

/** The dedupe key stored with lines the gateway itself sends the engine (no client's input). */
export const GATEWAY_KEY = '';

/** Client input keys remembered for dedupe (oldest forgotten first). */
const RECENT_KEYS = 4096;

/**
 * The way from a session to its engine: the agent link when one is bound, and every line
 * queued for the engine in the gateway's order, each with its input seq. A line is stored
 * before it is sent and kept until the agent acknowledges it, and sent again after the agent
 * reconnects (the agent applies each seq at most once). Also remembers which client inputs
 * were applied (by dedupe key), so a retry, even after a restart, is answered `duplicate`.
 */
export class EngineInputs {
  private seq = 0;
  /** Inputs handed to the agent link but not yet confirmed written to the engine. */
  private readonly pending = new PendingInputs();
  private readonly recent = new BoundedMap<string, true>(RECENT_KEYS);
  private bound: EngineHost | undefined;

  constructor(
    private readonly sessionId: string,
    private readonly store: SessionStore,
    private readonly logger: Logger,
    host: EngineHost | undefined,
  ) {
    this.bound = host;
  }

  /** The agent link, or undefined while it is down. */
  get host(): EngineHost | undefined {
    return this.bound;
  }

  /** Inputs queued for the engine that the agent has not yet confirmed written. */
  get unconfirmed(): number {
    return this.pending.size;
  }

  /** The last input seq the engine confirmed: it wrote every input up to here. */
  get confirmedSeq(): number {
    const oldest = this.pending.oldestSeq;
    return oldest === undefined ? this.seq : oldest - 1;
  }

  /** Takes back the inputs read from the store after a restart: pending until the agent says otherwise. */
  restore(inputs: readonly StoredInput[]): void {
    for (const i of inputs) {
      this.seq = Math.max(this.seq, i.seq);
      if (i.key !== GATEWAY_KEY) this.recent.set(i.key, true);
      let bytes: number;
      try {
        bytes = checkEngineInput(i.line).length; // a store written by an older gateway may hold what we now refuse
      } catch (err) {
        this.logger.warn(
          { sessionId: this.sessionId, seq: i.seq, err: (err as Error).message },
          'dropping a stored input the engine cannot take',
        );
        continue;
      }
      this.pending.push({ seq: i.seq, line: i.line, bytes });
    }
  }

  /** Whether the client input with this dedupe key was applied already. */
  seen(key: string): boolean {
    return this.recent.has(key);
  }

  /** Marks the client input with this dedupe key applied. */
  remember(key: string): void {
    this.recent.set(key, true);
  }

  /** Throws RESOURCE_EXHAUSTED, changing nothing, when `bytes` more would pass the pending bound. */
  assertRoom(bytes: number): void {
    this.pending.assertRoom(bytes, this.sessionId);
  }

  /**
   * Queues one line for the engine, in the gateway's order. While the agent is away it waits
   * (bounded) and goes out when the agent is back; nothing is dropped. `key` is the dedupe key
   * of the client input it comes from (kept with it, so a restart still answers a retry
   * `duplicate`), or GATEWAY_KEY for the gateway's own answers. Once stored, the input counts
   * as applied: a retry of it is a duplicate even if what follows here fails. `text`: the line
   * serialized, when the caller has it already (a client's line, checked).
   */
  toEngine(line: Record<string, unknown>, key: string, text: string = JSON.stringify(line)): void {
    const bytes = text.length;
    this.pending.assertRoom(bytes, this.sessionId);
    const seq = ++this.seq;
    this.store.appendInput(this.sessionId, { seq, key, line });
    this.pending.push({ seq, line, bytes });
    if (key !== GATEWAY_KEY) this.remember(key);
    this.bound?.input(this.sessionId, seq, line, text);
  }

  /** The agent link (re)bound the session, or went down (`undefined`). */
  bind(host: EngineHost | undefined): void {
    this.bound = host;
  }

  /**
   * Re-sends to the bound agent what it never confirmed: every input past `lastInputSeq`, the
   * last one it says it applied.
   */
  resendAfter(lastInputSeq: number): void {
    const host = this.bound;
    if (!host) return;
    // Never reuse a seq the agent applied: a store that lost the newest inputs (the cluster's,
    // when the gateway that took them died first) would otherwise number a new one as old.
    this.seq = Math.max(this.seq, lastInputSeq);
    this.ack(lastInputSeq);
    for (const p of this.pending.list()) {
      try {
        host.input(this.sessionId, p.seq, p.line);
      } catch (err) {
        // One bad input must not stop the others, this session or the agent's hello.
        this.logger.warn(
          { sessionId: this.sessionId, seq: p.seq, err: (err as Error).message },
          'dropping an input the agent link cannot take',
        );
        this.pending.drop(p.seq);
      }
    }
  }

  /** The agent wrote every input up to `seq` to the engine. */
  ack(seq: number): void {
    this.pending.ack(seq);
  }
}
