import { Fifo } from '../../core/util/fifo.js';
import type { RpcPeer } from '../../core/rpc/peer.js';
import type { FrameBytes } from '../../core/wire/session-frame.js';

/**
 * Most replay bytes a client's connection is given at once (less when its outbound budget is
 * small: half of it). A replay larger than this is fed as the connection drains.
 */
export const REPLAY_WINDOW_BYTES = 4 * 1024 * 1024;

/** The window of a connection with outbound budget `budgetBytes` (Infinity: none). */
export function replayWindowBytes(budgetBytes: number): number {
  return Math.min(REPLAY_WINDOW_BYTES, Math.max(1, budgetBytes / 2));
}

/** How often a feed that waits looks again at what its connection still holds (ms). */
export const REPLAY_FEED_POLL_MS = 2;

/**
 * Once this many looks in a row found the connection still full (≈100 ms: a reader that
 * stopped), the feed looks every {@link REPLAY_FEED_STALLED_POLL_MS} instead, until it moves
 * again: a client that never reads costs 20 wake-ups a second, not 500.
 */
export const REPLAY_FEED_STALL_LOOKS = 50;
export const REPLAY_FEED_STALLED_POLL_MS = 50;

/** One message of a replay: a frame, or several joined (`sizes`: the frames in it, for metrics). */
export interface ReplayMessage {
  frame: FrameBytes;
  bytes: number;
  sizes: readonly number[];
}

/** One message a feed sends (replayed, or `live`: sent meanwhile), or a step to run in its place. */
type Item = (ReplayMessage & { live: boolean }) | { run: () => void; pause: boolean; bytes: number };

/**
 * An attach's replay fed to one client's connection as it drains, never more than
 * {@link REPLAY_WINDOW_BYTES} held at once, with everything sent to the client meanwhile (live
 * frames, replies, the attach's answer) kept behind it in order. Posting a large replay at once
 * put it all in the connection's queue: over gRPC, HTTP/2 flow control keeps most of it there,
 * the slow-consumer budget was passed by the replay alone, the cut dropped what was not handed
 * over, and a client whose resume exceeded its budget was cut on every reconnect without
 * gaining a frame. Here only live frames queued behind the replay count against the budget: the
 * replay is the session's history from the client's position, bounded by the replay log's size
 * (8 MiB by default) and copied out of the log at the attach whether it is fed or posted at
 * once. A client is cut when it falls its budget behind the live stream, as before.
 */
export class ReplayFeed {
  private readonly queue = new Fifo<Item>();
  private liveBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Looks in a row that handed nothing over. */
  private emptyLooks = 0;
  private readonly windowBytes: number;

  constructor(
    private readonly peer: RpcPeer,
    /** Told of each frame as it is handed to the connection, with its size. */
    private readonly onSent: (bytes: number) => void,
  ) {
    this.windowBytes = replayWindowBytes(peer.maxBufferedBytes);
    void peer.channel.closed.then(() => this.clear());
  }

  /** True while something waits here: then everything for the client goes through {@link frame} and {@link inOrder}. */
  get active(): boolean {
    return this.queue.length > 0;
  }

  /** Queues an attach's replay, message by message; the part that fits now leaves now. */
  replay(messages: readonly ReplayMessage[]): void {
    for (const m of messages) this.queue.push({ ...m, live: false });
    if (this.timer === undefined) this.pump(); // else a pump is already due
  }

  /**
   * Queues a live frame behind what waits. False, having queued nothing, when the connection is
   * closed or the live frames waiting here are past its outbound budget (then it is cut).
   */
  frame(frame: FrameBytes, bytes: number): boolean {
    // As for a post: one more frame is taken while what waits is within the budget.
    if (!this.peer.admitQueued(this.liveBytes)) return false;
    this.liveBytes += bytes;
    this.queue.push({ frame, bytes, live: true, sizes: [bytes] });
    return true;
  }

  /**
   * Runs `step` (a reply of `bytes` to the client) once everything queued before it has been
   * handed over. Its bytes count with the live frames': false, having queued nothing, as for
   * {@link frame}.
   */
  inOrder(step: () => void, bytes: number): boolean {
    if (!this.peer.admitQueued(this.liveBytes)) return false;
    this.liveBytes += bytes;
    this.queue.push({ run: step, pause: false, bytes });
    return true;
  }

  /**
   * Resolves once everything queued so far has been handed to the connection (at once when
   * nothing waits), and sends nothing more in that turn of the event loop: a request answered
   * on it (the attach) leaves before the frames queued after it, as it would have unpaced.
   */
  reached(): Promise<void> {
    if (!this.active) return Promise.resolve();
    return new Promise((resolve) => this.queue.push({ run: resolve, pause: true, bytes: 0 }));
  }

  /** Hands over what the window allows; looks again shortly while something still waits. */
  private pump = (): void => {
    this.timer = undefined;
    const channel = this.peer.channel;
    // A WebSocket counts this turn's frames only once the turn ends: count them here.
    let given = 0;
    while (this.queue.length && !channel.isClosed && channel.bufferedBytes + given < this.windowBytes) {
      const item = this.queue.shift()!;
      if ('run' in item) {
        this.liveBytes -= item.bytes;
        item.run();
        if (item.pause) {
          this.timer = setTimeout(this.pump, 0);
          return;
        }
        continue;
      }
      if (item.live) this.liveBytes -= item.bytes;
      if (!this.peer.post(item.frame)) {
        if (channel.isClosed) return this.clear();
        continue; // over the frame limit: refused alone, as a direct post would be
      }
      given += item.bytes;
      for (const n of item.sizes) this.onSent(n);
    }
    if (channel.isClosed) return this.clear();
    if (!this.queue.length) return;
    this.emptyLooks = given > 0 ? 0 : this.emptyLooks + 1;
    this.timer = setTimeout(this.pump, this.emptyLooks < REPLAY_FEED_STALL_LOOKS ? REPLAY_FEED_POLL_MS : REPLAY_FEED_STALLED_POLL_MS);
  };

  /** The connection is gone: nothing more is sent; a pending {@link reached} resolves (its answer goes nowhere). */
  private clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const item of this.queue.takeAll()) if ('run' in item && item.pause) item.run();
    this.liveBytes = 0;
  }
}
