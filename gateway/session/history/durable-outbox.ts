import type { Durability } from './durability.js';
import type { FrameBytes } from '../../../core/wire/session-frame.js';

interface Held {
  seq: number;
  bytes: FrameBytes;
  readAtMs?: number;
}

/**
 * A session's frames on their way to its members, released only once Durability says they may
 * be shown. The file store writes frames in bursts (group commit); a frame a client saw but
 * the store lost in a crash would be numbered again after the restart, so no member sees a
 * frame before it is durable. With a store that keeps nothing frames go out at once. Frames
 * leave in seq order, each exactly once per member.
 */
export class DurableOutbox {
  private held: Held[] = [];
  private released: number;

  /**
   * `deliver` hands one frame to every member attached at that moment. `releasedSeq` starts at
   * the last seq of history already durable (a restored session's).
   */
  constructor(
    private readonly durability: Durability,
    private readonly deliver: (bytes: FrameBytes, readAtMs?: number) => void,
    releasedSeq = 0,
  ) {
    this.released = releasedSeq;
  }

  /** Highest seq handed to members: history up to here may be replayed to a new member. */
  get releasedSeq(): number {
    return this.released;
  }

  /** Queues a frame just appended to the store; it goes out once it may be shown. */
  push(seq: number, bytes: FrameBytes, readAtMs?: number): void {
    this.held.push({ seq, bytes, readAtMs });
    if (this.held.length === 1) this.durability.mayShow(() => this.release());
  }

  private release(): void {
    const batch = this.held;
    this.held = [];
    for (const f of batch) {
      this.released = f.seq;
      this.deliver(f.bytes, f.readAtMs);
    }
  }
}
