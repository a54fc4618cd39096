import { TetherError } from '../../core/errors.js';

/** Inputs waiting for the agent before new ones are refused (backpressure on clients). */
export const MAX_PENDING_INPUTS = 1024;
/** Bytes of inputs waiting for the agent before new ones are refused. */
export const MAX_PENDING_INPUT_BYTES = 64 * 1024 * 1024;

/** One input handed to the agent link and not yet confirmed written to the engine. */
export interface PendingInput {
  seq: number;
  line: Record<string, unknown>;
  /** Its serialized size, counted against {@link MAX_PENDING_INPUT_BYTES}. */
  bytes: number;
}

/**
 * A session's inputs waiting for the agent's cumulative ack, in seq order; bounded in count
 * and bytes. Re-sent after the agent reconnects; released by acks.
 */
export class PendingInputs {
  private items: PendingInput[] = [];
  private bytes = 0;

  /** How many inputs wait for the agent's ack. */
  get size(): number {
    return this.items.length;
  }

  /** The seq of the oldest input waiting, if any. */
  get oldestSeq(): number | undefined {
    return this.items[0]?.seq;
  }

  /** Throws RESOURCE_EXHAUSTED, changing nothing, when `bytes` more would pass a bound. */
  assertRoom(bytes: number, sessionId: string): void {
    if (this.items.length >= MAX_PENDING_INPUTS || this.bytes + bytes > MAX_PENDING_INPUT_BYTES) {
      throw new TetherError(
        'RESOURCE_EXHAUSTED',
        `${this.items.length} inputs (${this.bytes} bytes) are waiting for the agent of session ${sessionId}; retry later`,
      );
    }
  }

  /** Adds one input (after assertRoom, or when restoring what was already accepted). */
  push(input: PendingInput): void {
    this.items.push(input);
    this.bytes += input.bytes;
  }

  /** Releases every input up to `seq`. */
  ack(seq: number): void {
    let n = 0;
    while (n < this.items.length && this.items[n].seq <= seq) this.bytes -= this.items[n++].bytes;
    if (n) this.items = this.items.slice(n);
  }

  /** Forgets one input (one that can never be sent). */
  drop(seq: number): void {
    const i = this.items.findIndex((p) => p.seq === seq);
    if (i < 0) return;
    this.bytes -= this.items[i].bytes;
    this.items.splice(i, 1);
  }

  /** A snapshot, oldest first (safe to drop from while iterating it). */
  list(): PendingInput[] {
    return [...this.items];
  }
}
