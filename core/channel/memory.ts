import type { TetherError, ErrorCode } from '../errors.js';
import { BaseChannel, type BaseChannelOptions, type Transport } from './channel.js';
import { frameBytes, type OutgoingFrame, type WireFrame } from '../wire/frame.js';
import { Fifo } from '../util/fifo.js';

/**
 * An in-memory channel pair: what one side sends, the other iterates. Used by unit tests and
 * by the conformance suite; it honours the same backpressure and close rules as the network
 * adapters (a paused reader makes the sender's bufferedBytes grow).
 */
export function memoryChannelPair(opts: BaseChannelOptions = {}): [MemoryChannel, MemoryChannel] {
  const a = new MemoryChannel('memory:a', opts);
  const b = new MemoryChannel('memory:b', opts);
  a.peer = b;
  b.peer = a;
  return [a, b];
}

export class MemoryChannel extends BaseChannel {
  readonly transport: Transport = 'memory';
  peer!: MemoryChannel;
  private outbox = new Fifo<{ frame: WireFrame; bytes: number; done: () => void; fail: (err: TetherError) => void }>();
  private outboxBytes = 0;
  private inputPaused = false;
  private flushing = false;

  constructor(
    readonly remote: string,
    opts: BaseChannelOptions,
  ) {
    super(opts);
  }

  get bufferedBytes(): number {
    return this.outboxBytes;
  }

  protected write(frame: OutgoingFrame): Promise<void> {
    return new Promise((resolve, reject) => {
      const bytes = frameBytes(frame);
      // Text sent as bytes arrives as text, as it would over a socket.
      const delivered =
        frame instanceof Uint8Array ? Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).toString('utf8') : frame;
      this.outbox.push({ frame: delivered, bytes, done: resolve, fail: reject });
      this.outboxBytes += bytes;
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    if (this.flushing) return;
    this.flushing = true;
    queueMicrotask(() => {
      this.flushing = false;
      this.flush();
    });
  }

  /** Moves frames to the peer while it is reading; stops when it pauses. */
  flush(): void {
    while (this.outbox.length && !this.peer.inputPaused && !this.isClosed) {
      const item = this.outbox.shift()!;
      this.outboxBytes -= item.bytes;
      this.peer.receive(item.frame);
      item.done();
    }
  }

  private receive(frame: WireFrame): void {
    if (frameBytes(frame) > this.maxFrameBytes) {
      this.close('RESOURCE_EXHAUSTED', 'frame exceeds the limit');
      return;
    }
    this.push(frame);
  }

  protected shutdown(code: ErrorCode | 'OK', reason: string): void {
    queueMicrotask(() => this.peer.peerClosed(code, reason));
  }

  /** Frames still in our outbox were never handed over: a closed pipe drops them, like a socket. */
  protected override dropUnsent(err: TetherError): void {
    const dropped = this.outbox.takeAll();
    this.outboxBytes = 0;
    for (const item of dropped) item.fail(err);
  }

  private peerClosed(code: ErrorCode | 'OK', reason: string): void {
    this.settle({ code, reason, byPeer: true });
  }

  /** Simulates abrupt loss (no close handshake) on both sides. */
  destroy(): void {
    this.settle({ code: 'UNAVAILABLE', reason: 'connection lost', byPeer: true });
    this.peer.settle({ code: 'UNAVAILABLE', reason: 'connection lost', byPeer: true });
  }

  protected pauseInput(): void {
    this.inputPaused = true;
  }

  protected resumeInput(): void {
    this.inputPaused = false;
    this.peer.scheduleFlush();
  }
}
