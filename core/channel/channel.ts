import type { ErrorCode } from '../errors.js';
import { TetherError } from '../errors.js';
import { Wakeup } from '../util/wakeup.js';
import { Fifo } from '../util/fifo.js';
import { TextPieces } from '../wire/text-pieces.js';
import { BINARY_FRAME_OVERHEAD_BYTES, frameBytes, type OutgoingFrame, type SendableFrame, type WireFrame } from '../wire/frame.js';

/** Cheap size used for queue accounting: UTF-16 units for text, bytes for binary. */
function queuedSize(frame: WireFrame): number {
  return typeof frame === 'string' ? frame.length : BINARY_FRAME_OVERHEAD_BYTES + frame.header.length + frame.body.byteLength;
}

/** Which wire a channel runs over. */
export type Transport = 'memory' | 'ws' | 'grpc';

/** How a channel ended. `code` is `OK` for an orderly close. */
export interface CloseInfo {
  code: ErrorCode | 'OK';
  reason: string;
  /** True when the other side (or the network) ended it, false when we called close(). */
  byPeer: boolean;
}

/** How a channel ended, when this side cut it with an error code (not the peer leaving, not an orderly close). */
export function cutOf(info: CloseInfo): { code: ErrorCode; reason: string } | undefined {
  return !info.byPeer && info.code !== 'OK' ? { code: info.code, reason: info.reason } : undefined;
}

/**
 * The seam between transports and everything above them. A channel is handed out already
 * open (and, at the gateway, already authenticated). Frames are JSON text or BinaryFrames (a
 * header with bytes; what a frame is and weighs: core/wire/frame.ts); each arrives as the kind
 * it was sent.
 *
 * - Reading is pull-style: iterate the channel. While nobody pulls, the adapter stops reading
 *   the socket once its bounded inbound queue is full (backpressure reaches the peer).
 *   Iteration yields the frames received before the close and then ends.
 * - `send()` resolves when the frame is handed to the transport (not "delivered"), and
 *   rejects with a TetherError when the channel is closed or the frame is over the limit.
 * - `close()` is idempotent; `closed` settles exactly once, whichever side closed first.
 */
export interface Channel extends AsyncIterable<WireFrame> {
  readonly transport: Transport;
  /** Peer address or label, for logs. */
  readonly remote: string;
  /** Largest frame, in bytes ({@link frameBytes}), that send() accepts and the peer may send us. */
  readonly maxFrameBytes: number;
  /**
   * Bytes accepted by send() but not yet written to the network. An adapter that holds the
   * frames posted in one turn of the event loop to write them together may leave them out
   * until the turn ends (WebSocket does).
   */
  readonly bufferedBytes: number;
  /**
   * Bytes received from the peer so far, counting frames still arriving where the transport
   * can tell (WebSocket: the socket's bytes read), else whole frames only. Liveness checks
   * use it: a peer whose bytes keep arriving is alive, however slow the link.
   */
  readonly receivedBytes: number;
  /**
   * Bytes received but not yet pulled by the reader. Bounded: past the inbound high-water
   * mark the adapter stops reading its transport, so a reader that stops pulling keeps this
   * near the mark (plus what was already on its way).
   */
  readonly inboundQueuedBytes: number;
  readonly isClosed: boolean;
  /**
   * The next frame received, taken off the queue, or undefined when none is queued: a reader
   * that drains a burst this way costs one wake-up per burst, not one per frame (iteration is
   * built on it; use one or the other).
   */
  read(): WireFrame | undefined;
  /** Resolves once a frame is queued or the channel has closed (at once if so already). */
  readable(): Promise<void>;
  send(frame: SendableFrame): Promise<void>;
  /**
   * Fire-and-forget send for hot paths (broadcast to many clients): no promise per frame.
   * Returns false, having sent nothing, when the channel is closed or the frame is over the
   * limit. A transport error later closes the channel as usual.
   */
  post(frame: SendableFrame): boolean;
  close(code?: ErrorCode | 'OK', reason?: string): void;
  readonly closed: Promise<CloseInfo>;
  /** Aborted when the channel closes. */
  readonly signal: AbortSignal;
}

/** Defaults shared by every adapter; each is overridable per channel. */
export const CHANNEL_DEFAULTS = {
  /**
   * 33 MiB: one engine line of up to 16 MiB must fit in one frame with its envelope, and
   * carrying the line as a JSON string can at worst double it (every `\"` becomes `\\\"`).
   */
  maxFrameBytes: 33 * 1024 * 1024,
  /** Inbound frames queued before the adapter stops reading the socket. */
  inboundHighWaterFrames: 256,
  /** Inbound bytes queued before the adapter stops reading the socket. */
  inboundHighWaterBytes: 8 * 1024 * 1024,
} as const;

export interface BaseChannelOptions {
  maxFrameBytes?: number;
  inboundHighWaterFrames?: number;
  inboundHighWaterBytes?: number;
}

/**
 * Shared bookkeeping for adapters: the bounded inbound queue, pull iteration, the single
 * settlement of `closed`. Adapters implement the four abstract hooks and call `push()` for
 * each received frame and `settle()` when their transport ends.
 */
export abstract class BaseChannel implements Channel {
  abstract readonly transport: Transport;
  abstract readonly remote: string;
  abstract readonly bufferedBytes: number;
  readonly maxFrameBytes: number;
  readonly closed: Promise<CloseInfo>;

  private readonly abort = new AbortController();
  private resolveClosed!: (info: CloseInfo) => void;
  private readonly queue = new Fifo<WireFrame>();
  private queuedBytes = 0;
  private framesBytes = 0;
  private paused = false;
  private readonly wakeup = new Wakeup();
  private closeInfo: CloseInfo | undefined;
  private readonly highFrames: number;
  private readonly highBytes: number;

  get inboundQueuedBytes(): number {
    return this.queuedBytes;
  }

  constructor(opts: BaseChannelOptions = {}) {
    this.maxFrameBytes = opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes;
    this.highFrames = opts.inboundHighWaterFrames ?? CHANNEL_DEFAULTS.inboundHighWaterFrames;
    this.highBytes = opts.inboundHighWaterBytes ?? CHANNEL_DEFAULTS.inboundHighWaterBytes;
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get isClosed(): boolean {
    return this.closeInfo !== undefined;
  }

  /** Characters of the frames received so far; adapters that can see partial frames override it. */
  get receivedBytes(): number {
    return this.framesBytes;
  }

  /** Writes one frame to the transport; called only while open and within the limit. */
  protected abstract write(frame: OutgoingFrame): Promise<void>;
  /** Ends the transport; called once, by close(). */
  protected abstract shutdown(code: ErrorCode | 'OK', reason: string): void;
  /** Stop / restart reading from the transport (backpressure). */
  protected abstract pauseInput(): void;
  protected abstract resumeInput(): void;

  post(frame: SendableFrame): boolean {
    if (this.closeInfo || !this.fits(frame)) return false;
    if (frame instanceof TextPieces) this.writePieces(frame);
    else this.writeNoWait(frame);
    return true;
  }

  /**
   * Writes text pieces as one message, without waiting. This default joins them (once per
   * frame, see TextPieces.joined); an adapter that can send them as they are overrides it.
   */
  protected writePieces(pieces: TextPieces): void {
    this.writeNoWait(pieces.joined());
  }

  /** Writes without waiting; adapters override when they can skip the per-frame callback. */
  protected writeNoWait(frame: OutgoingFrame): void {
    this.write(frame).catch(() => {});
  }

  /** UTF-8 is at most 3 bytes per UTF-16 unit: only long text frames need counting. */
  private fits(frame: SendableFrame): boolean {
    if (typeof frame === 'string') return frame.length * 3 <= this.maxFrameBytes || Buffer.byteLength(frame) <= this.maxFrameBytes;
    return frameBytes(frame) <= this.maxFrameBytes;
  }

  send(frame: SendableFrame): Promise<void> {
    if (this.closeInfo) {
      return Promise.reject(new TetherError('FAILED_PRECONDITION', `channel closed: ${this.closeInfo.reason}`));
    }
    if (!this.fits(frame)) {
      const size = frameBytes(frame);
      return Promise.reject(
        new TetherError('RESOURCE_EXHAUSTED', `frame of ${size} bytes exceeds the limit of ${this.maxFrameBytes} bytes`, {
          size,
          limit: this.maxFrameBytes,
        }),
      );
    }
    return this.write(frame instanceof TextPieces ? frame.joined() : frame);
  }

  close(code: ErrorCode | 'OK' = 'OK', reason = 'closed'): void {
    if (this.closeInfo) return;
    this.settle({ code, reason, byPeer: false });
    this.shutdown(code, reason);
  }

  /** Adapters call this for every received frame. */
  protected push(frame: WireFrame): void {
    if (this.closeInfo) return;
    this.queue.push(frame);
    const size = queuedSize(frame);
    this.queuedBytes += size;
    this.framesBytes += size;
    if (!this.paused && (this.queue.length >= this.highFrames || this.queuedBytes >= this.highBytes)) {
      this.paused = true;
      this.pauseInput();
    }
    this.wakeup.wake();
  }

  /** Adapters call this when the transport has ended; only the first call counts. */
  protected settle(info: CloseInfo): void {
    if (this.closeInfo) return;
    this.closeInfo = info;
    this.resolveClosed(info);
    this.abort.abort(new TetherError(info.code === 'OK' ? 'CANCELLED' : info.code, info.reason));
    this.dropUnsent(new TetherError('UNAVAILABLE', `channel closed before the frame was handed over: ${info.reason}`));
    this.wakeup.wake();
  }

  /**
   * Called once, as the channel settles (however it ended): an adapter that queues frames
   * before handing them to its transport fails those with `err` here, so their send()
   * promises reject instead of hanging. Frames already handed over are the adapter's to settle.
   */
  protected dropUnsent(_err: TetherError): void {}

  read(): WireFrame | undefined {
    const frame = this.queue.shift();
    if (frame === undefined) return undefined;
    this.queuedBytes -= queuedSize(frame);
    if (this.paused && this.queue.length < this.highFrames / 2 && this.queuedBytes < this.highBytes / 2) {
      this.paused = false;
      if (!this.closeInfo) this.resumeInput();
    }
    return frame;
  }

  readable(): Promise<void> {
    if (this.queue.length || this.closeInfo) return Promise.resolve();
    return this.wakeup.wait();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<WireFrame> {
    for (;;) {
      const frame = this.read();
      if (frame !== undefined) {
        yield frame;
        continue;
      }
      if (this.closeInfo) return;
      await this.readable();
    }
  }
}
