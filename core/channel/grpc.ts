import type { ChannelOptions, ClientDuplexStream, ServerDuplexStream, StatusObject } from '@grpc/grpc-js';
import { codeFromGrpc, ERROR_TABLE, TetherError, type ErrorCode } from '../errors.js';
import { BaseChannel, type BaseChannelOptions, type CloseInfo, type Transport } from './channel.js';
import { BINARY_FRAME_OVERHEAD_BYTES, frameBytes, type OutgoingFrame, type WireFrame } from '../wire/frame.js';
import { Fifo } from '../util/fifo.js';
import { EndOfTurn, type TurnEnd } from './end-of-turn.js';
import { batchEntryBytes, encodeBatch, FrameEncoder, type GatewayFrame, type SharedFrame } from '../wire/grpc-frame.js';
import type { TextPieces } from '../wire/text-pieces.js';
import { BATCH_FRAME_MAX_BYTES } from '../wire/grpc-batch.js';

/**
 * Bytes a gRPC message may carry beyond the frame itself. A Frame's protobuf envelope is one
 * tag byte plus a length varint (at most 5 bytes); the rest is margin, so a peer that sends a
 * frame slightly over our limit reaches our own check (a clear RESOURCE_EXHAUSTED reason)
 * instead of grpc-js's generic one.
 */
export const GRPC_FRAME_SLACK_BYTES = 1024;

/** Link settings shared by the gRPC listener and dialer; each is overridable there. */
export const GRPC_DEFAULTS = {
  /** Ping the peer after this long without activity (threats.md part 3: 15 s). */
  keepaliveTimeMs: 15_000,
  /** Declare the connection dead when a ping is not answered within this (10 s). */
  keepaliveTimeoutMs: 10_000,
  /** nghttp2 per-connection memory bound, in MiB (grpc-js default: unlimited). */
  maxSessionMemoryMiB: 64,
  /**
   * HTTP/2 receive window, per stream and per connection, on both ends (Node's default: 64 KiB).
   * A link carries one stream of frames up to 16 MiB; with 64 KiB a 100 KB frame cannot leave
   * before the receiver's WINDOW_UPDATE comes back, so each large frame waited a round trip of
   * two event loops (docs/performance-notebook.md, "the HTTP/2 window"). 4 MiB, the replay
   * feed's window too, is less than one largest frame, which a peer can already make the
   * receiver hold; nghttp2's session memory (above) bounds both.
   */
  flowControlWindowBytes: 4 * 1024 * 1024,
  /**
   * Shortest ping interval a server tolerates from a client without data. Below our own
   * keepaliveTimeMs so our clients are never struck (grpc-js ignores it; C-core and other
   * servers enforce it).
   */
  minPingIntervalWithoutDataMs: 5_000,
  /** How long an orderly close may wait for the stream to finish before it is cut. */
  closeTimeoutMs: 5_000,
} as const;

/** Inputs of {@link grpcLinkOptions}; unset keepalive values take {@link GRPC_DEFAULTS}. */
export interface GrpcLinkOptions {
  maxFrameBytes: number;
  keepaliveTimeMs?: number;
  keepaliveTimeoutMs?: number;
}

/**
 * The grpc-js options both ends of a link set, so they agree: message limits of
 * maxFrameBytes + {@link GRPC_FRAME_SLACK_BYTES} in both directions (grpc-js defaults to
 * 4 MiB receive / unlimited send; our frames may be ~16 MiB), session memory, the dialer's
 * HTTP/2 receive window, and keepalive with pings allowed without calls.
 */
export function grpcLinkOptions(opts: GrpcLinkOptions): ChannelOptions {
  const messageLimit = opts.maxFrameBytes + GRPC_FRAME_SLACK_BYTES;
  return {
    'grpc.max_receive_message_length': messageLimit,
    'grpc.max_send_message_length': messageLimit,
    'grpc-node.max_session_memory': GRPC_DEFAULTS.maxSessionMemoryMiB,
    'grpc.keepalive_time_ms': opts.keepaliveTimeMs ?? GRPC_DEFAULTS.keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': opts.keepaliveTimeoutMs ?? GRPC_DEFAULTS.keepaliveTimeoutMs,
    'grpc.keepalive_permit_without_calls': 1,
    // The dialer's receive window (grpc-js applies it to the connections it makes; its server
    // ignores it: the gateway's listener widens its sessions itself, listen-grpc.ts).
    'grpc-node.flow_control_window': GRPC_DEFAULTS.flowControlWindowBytes,
  };
}

/** Options of both gRPC adapters: the BaseChannel limits, the close timeout and batching. */
export interface GrpcChannelOptions extends BaseChannelOptions {
  /** How long an orderly close waits for the stream to finish before cutting it (default 5 s). */
  closeTimeoutMs?: number;
  /**
   * Largest batch the peer takes, from its `tether-frame-batch` offer (core/wire/grpc-batch.ts);
   * absent: the peer offered none, every frame goes in a message of its own.
   */
  batchBytes?: number;
  /**
   * Where this channel lists itself to send its batches at the end of a turn: a listener hands
   * one to all its channels, so one tick flushes them all. Default: one of its own.
   */
  endOfTurn?: EndOfTurn;
  /**
   * Encodes the channel's frames: a listener hands one to all its channels, so a frame posted
   * to every client is encoded once. Default: one of its own.
   */
  encoder?: FrameEncoder;
}

type DuplexCall = ServerDuplexStream<GatewayFrame, GatewayFrame> | ClientDuplexStream<GatewayFrame, GatewayFrame>;

interface WriteItem {
  /** The frame as an encoded tether.v1.Frame (the serializer takes it as it is); unset until `frame` is encoded. */
  encoded?: Buffer;
  /** A large frame of a dialer, encoded only as grpc-js takes it (see enqueue). */
  frame?: Exclude<OutgoingFrame, string>;
  bytes: number;
  resolve: () => void;
  reject: (err: TetherError) => void;
  /** The encoder's slab frame `encoded` lies in: given back once grpc-js no longer reads it. */
  shared?: SharedFrame;
}

/** What one gRPC message carries: one frame, or a batch of them. */
type WriteGroup = WriteItem | WriteItem[];

/** What a posted frame's write reports to: nobody waits on it (a failure closes the channel). */
const ignore = (): void => {};

function settleWrite(item: WriteItem, err: TetherError | undefined, encoder: FrameEncoder): void {
  if (item.shared) encoder.release(item.shared);
  if (err) item.reject(err);
  else item.resolve();
}

/**
 * Maps a gRPC status received from the peer to how a channel ended (always byPeer): OK, or the
 * canonical code of the status (unknown numbers → UNAVAILABLE); grpc-js's size-limit
 * rejections get a clearer reason.
 */
export function closeInfoFromStatus(status: Pick<StatusObject, 'code' | 'details'>): CloseInfo {
  if (status.code === 0) return { code: 'OK', reason: 'peer closed the stream', byPeer: true };
  const code = codeFromGrpc(status.code);
  const details = status.details || `gRPC status ${status.code}`;
  const reason =
    code === 'RESOURCE_EXHAUSTED' && /larger than max/i.test(details) ? `frame over the gRPC message limit (${details})` : details;
  return { code, reason, byPeer: true };
}

/**
 * The shared half of the two gRPC adapters: frames in (`data`, checked against
 * maxFrameBytes; a batch's frames one by one), frames out with backpressure, pause/resume.
 * Frames wait in a local queue while grpc-js reports a full write buffer (`write()` returned
 * false) and move on at 'drain'; `bufferedBytes` counts those plus frames handed to grpc-js
 * whose write has not completed (HTTP/2 flow control holds them while the peer does not read).
 *
 * Towards a peer that takes batches, frames wait in the queue until the end of the turn of the
 * event loop they were sent in, and leave as batches of up to `batchBytes` (frames over
 * {@link BATCH_FRAME_MAX_BYTES} alone): one gRPC message per burst instead of one per frame.
 * They count in `bufferedBytes` from the start, as before.
 */
abstract class GrpcChannelBase extends BaseChannel implements TurnEnd {
  readonly transport: Transport = 'grpc';
  protected readonly closeTimeoutMs: number;
  private outbox = new Fifo<WriteItem>();
  private outboxBytes = 0;
  private readonly inflight = new Set<WriteGroup>();
  private inflightBytes = 0;
  private awaitingDrain = false;
  private finishTimer: NodeJS.Timeout | undefined;
  private finished = false;
  private readonly batchBytes: number | undefined;
  private flushDue = false;
  private readonly endOfTurn: EndOfTurn;
  private readonly encoder: FrameEncoder;

  constructor(
    protected readonly call: DuplexCall,
    readonly remote: string,
    opts: GrpcChannelOptions,
  ) {
    super(opts);
    this.closeTimeoutMs = opts.closeTimeoutMs ?? GRPC_DEFAULTS.closeTimeoutMs;
    this.batchBytes = opts.batchBytes;
    this.endOfTurn = opts.endOfTurn ?? new EndOfTurn();
    this.encoder = opts.encoder ?? new FrameEncoder();
    call.on('data', (message: GatewayFrame) => this.receive(message));
    call.on('drain', () => {
      this.awaitingDrain = false;
      this.pump();
    });
  }

  get bufferedBytes(): number {
    return this.outboxBytes + this.inflightBytes;
  }

  private receive(message: GatewayFrame): void {
    const batch = message?.batch;
    if (!batch) return this.receiveOne(message);
    for (const frame of batch) this.receiveOne(frame);
  }

  private receiveOne(message: GatewayFrame): void {
    if (this.isClosed) return;
    const json = typeof message?.json === 'string' ? message.json : '';
    const frame: WireFrame = message?._data === 'data' && message.data ? { header: json, body: message.data } : json;
    // The message told the text's UTF-8 size: no second scan of a large frame to learn it.
    const jsonBytes = message?.jsonLength ?? Buffer.byteLength(json);
    const size = typeof frame === 'string' ? jsonBytes : BINARY_FRAME_OVERHEAD_BYTES + jsonBytes + frame.body.byteLength;
    if (size > this.maxFrameBytes) {
      this.close('RESOURCE_EXHAUSTED', `peer sent a frame of ${size} bytes, over the limit of ${this.maxFrameBytes} bytes`);
      return;
    }
    this.push(frame);
  }

  protected write(frame: OutgoingFrame): Promise<void> {
    return new Promise((resolve, reject) => this.enqueue(frame, resolve, reject));
  }

  /** No promise per frame: posted frames are the hot path (one per engine line and client). */
  protected override writeNoWait(frame: OutgoingFrame): void {
    this.enqueue(frame, ignore, ignore);
  }

  private enqueue(frame: OutgoingFrame, resolve: () => void, reject: (err: TetherError) => void): void {
    // Text is encoded to UTF-8 once, and measured by that.
    const outgoing = typeof frame === 'string' ? Buffer.from(frame, 'utf8') : frame;
    const bytes = frameBytes(outgoing);
    // A dialer's large frame waits unencoded (its bytes are its sender's, who keeps them anyway:
    // the agent until the gateway acks them) and is encoded as grpc-js takes it, so a queue
    // behind a slow link holds no second copy that outlives V8's young generation. The
    // listener's large frames are encoded without a copy (headroom) or into its slabs.
    if (!this.copiesOnWrite && bytes > BATCH_FRAME_MAX_BYTES) this.queueWrite({ frame: outgoing, bytes, resolve, reject });
    else this.queueWrite({ encoded: this.encodeOutgoing(outgoing), bytes, resolve, reject });
  }

  /**
   * Large text in pieces goes into the encoder's slabs where grpc-js copies a message when it
   * takes the write ({@link copiesOnWrite}); elsewhere the pieces are joined, as by default.
   */
  protected override writePieces(pieces: TextPieces): void {
    if (!this.copiesOnWrite) return super.writePieces(pieces);
    const shared = this.encoder.encodePieces(pieces);
    this.queueWrite({ encoded: shared.bytes, bytes: pieces.byteLength, resolve: ignore, reject: ignore, shared });
  }

  /**
   * Whether grpc-js is done with a message's bytes once its write completes: then they may lie
   * in slabs that are reused after. The server copies each message into its own framed Buffer
   * as it takes the write; the client may keep it past the callback (its retry buffer, its
   * asynchronous filters).
   */
  protected abstract readonly copiesOnWrite: boolean;

  private queueWrite(item: WriteItem): void {
    const bytes = item.bytes;
    this.outbox.push(item);
    this.outboxBytes += bytes;
    if (this.batchBytes === undefined) this.pump();
    else if (!this.flushDue) {
      this.flushDue = true;
      this.endOfTurn.add(this);
    }
  }

  /** Encodes a frame as a tether.v1.Frame; bytes already encoded as UTF-8 once for every client are encoded once too. */
  private encodeOutgoing(frame: Exclude<OutgoingFrame, string>): Buffer {
    if (frame instanceof Uint8Array) return this.encoder.encode({ json: '', jsonBytes: frame });
    return this.encoder.encode({ json: frame.header, data: frame.body });
  }

  /** The end of a turn this channel held frames in (its EndOfTurn calls it): they leave in batches. */
  endTurn(): void {
    this.flushDue = false;
    try {
      this.pump();
    } catch (err) {
      // One channel's failure must not leave the others of the turn unsent.
      this.close('INTERNAL', `sending a batch failed: ${String(err)}`);
    }
  }

  /** A close sends this turn's frames first, as it would have without batching. */
  override close(code: ErrorCode | 'OK' = 'OK', reason = 'closed'): void {
    if (this.flushDue && !this.isClosed) this.pump();
    super.close(code, reason);
  }

  /** Hands queued frames to grpc-js (in batches when the peer takes them) until it asks us to wait for 'drain'. */
  private pump(): void {
    const max = this.batchBytes;
    while (!this.awaitingDrain && !this.isClosed && this.outbox.length) {
      const first = this.outbox.shift()!;
      const encoded = first.encoded ?? this.encodeOutgoing(first.frame!);
      first.frame = undefined;
      let batch: WriteItem[] | undefined;
      let size = batchEntryBytes(encoded.length);
      // Frames left unencoded are large: they go alone.
      if (max !== undefined && first.encoded && encoded.length <= BATCH_FRAME_MAX_BYTES) {
        for (let next = this.outbox.peek(); next?.encoded && next.encoded.length <= BATCH_FRAME_MAX_BYTES; next = this.outbox.peek()) {
          const entry = batchEntryBytes(next.encoded.length);
          if (size + entry > max) break;
          (batch ??= [first]).push(this.outbox.shift()!);
          size += entry;
        }
      }
      if (batch)
        this.writeGroup(
          batch,
          encodeBatch(
            batch.map((item) => item.encoded!),
            size,
          ),
        );
      else this.writeGroup(first, encoded);
    }
  }

  /** Writes one gRPC message; the frames in it settle when grpc-js reports the write done. */
  private writeGroup(group: WriteGroup, message: Buffer): void {
    let bytes = 0;
    if (Array.isArray(group)) for (const item of group) bytes += item.bytes;
    else bytes = group.bytes;
    this.outboxBytes -= bytes;
    this.inflight.add(group);
    this.inflightBytes += bytes;
    // The serializer takes an encoded Frame as it is (core/channel/proto.ts).
    const more = this.call.write(message as unknown as GatewayFrame, (err?: Error | null) => {
      if (!this.inflight.delete(group)) return; // already failed by finish()
      this.inflightBytes -= bytes;
      const fail = err ? new TetherError('UNAVAILABLE', `frame not written: ${err.message}`) : undefined;
      if (Array.isArray(group)) for (const item of group) settleWrite(item, fail, this.encoder);
      else settleWrite(group, fail, this.encoder);
    });
    if (!more) this.awaitingDrain = true;
  }

  protected pauseInput(): void {
    this.call.pause();
  }

  protected resumeInput(): void {
    this.call.resume();
  }

  /**
   * Delivers frames grpc-js has already buffered on the call's readable side (while we were
   * paused) before the channel settles: `read()` re-emits each as 'data'.
   */
  protected drainReadable(): void {
    while (this.call.readableLength > 0 && this.call.read() !== null) {
      // each read() emitted 'data', which pushed the frame
    }
  }

  /** Frames still waiting in our queue were never handed to the transport: rejected as the channel settles. */
  protected override dropUnsent(err: TetherError): void {
    const dropped = this.outbox.takeAll();
    this.outboxBytes = 0;
    for (const item of dropped) settleWrite(item, err, this.encoder);
  }

  /**
   * Settles once. Frames already handed over may still be flushed by an orderly end, so they
   * are failed only when the call finishes or the close timeout passes.
   */
  protected override settle(info: CloseInfo): void {
    if (this.isClosed) return;
    super.settle(info);
    if (!this.finished) {
      this.finishTimer = setTimeout(() => this.finish('close timeout'), this.closeTimeoutMs);
      this.finishTimer.unref();
    }
  }

  /** The call is over (or given up on): fail writes that will never complete. Runs once. */
  protected finish(why: string): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.finishTimer);
    const err = new TetherError('UNAVAILABLE', `channel closed before the frame was written (${why})`);
    // grpc-js may still read what it was handed (a write it holds until the stream ends): never reused.
    const fail = (item: WriteItem) => {
      if (item.shared) this.encoder.forsake(item.shared);
      item.reject(err);
    };
    for (const group of this.inflight) {
      if (Array.isArray(group)) for (const item of group) fail(item);
      else fail(group);
    }
    this.inflight.clear();
    this.inflightBytes = 0;
    this.onFinished();
  }

  /** Side-specific cleanup once the call is over. */
  protected abstract onFinished(): void;

  /** Drops whatever the peer still sends, so its end of stream (or status) can arrive. */
  protected discardInput(): void {
    this.call.resume();
  }
}

/**
 * The gateway side of tether.v1.Gateway/Connect as a Channel; the only place that knows the
 * server call's events. One instance per call, created by the gRPC listener.
 *
 * - close('OK') ends the stream with status OK after frames already handed to grpc-js;
 *   close(code) ends it with that code's gRPC status and the reason as details.
 * - The caller half-closing ends the channel with OK (byPeer) once every frame it sent has
 *   been read, and is answered with status OK; a cancel or lost connection ends it with
 *   CANCELLED (byPeer) — grpc-js reports both the same way. grpc-js itself
 *   rejecting an oversized message also surfaces here as CANCELLED (the caller sees
 *   RESOURCE_EXHAUSTED): grpc-js does not expose that status to the handler.
 * - grpc-js offers a server handler no way to reset a stream, so a status waits behind
 *   frames the peer has not read; our own `closed` settles at once regardless.
 */
export class GrpcServerChannel extends GrpcChannelBase {
  protected readonly copiesOnWrite = true;
  private ended = false;

  constructor(
    private readonly serverCall: ServerDuplexStream<GatewayFrame, GatewayFrame>,
    opts: GrpcChannelOptions = {},
  ) {
    super(serverCall, serverCall.getPeer(), opts);
    serverCall.on('end', () => {
      // The caller half-closed (after every frame it sent was read). But Node's http2 also ends
      // the request stream when the connection drops, with grpc-js's 'cancelled' a few ticks
      // later: wait one turn of the event loop so a lost link is not mistaken for an orderly close.
      setImmediate(() => {
        if (this.serverCall.cancelled) return; // the 'cancelled' handler settled it
        this.settle({ code: 'OK', reason: 'peer closed the stream', byPeer: true });
        this.endCall('OK', 'OK');
      });
    });
    serverCall.on('cancelled', () => {
      this.drainReadable();
      this.settle({ code: 'CANCELLED', reason: 'stream cancelled by the peer or the connection was lost', byPeer: true });
      this.finish('cancelled');
    });
    serverCall.on('error', (err: { code?: number; details?: string; message?: string }) => {
      // Our own endCall() emits 'error' to send a status; then we are already settled.
      const code: ErrorCode = typeof err.code === 'number' && err.code !== 0 ? codeFromGrpc(err.code) : 'INTERNAL';
      this.settle({ code, reason: err.details ?? err.message ?? 'stream error', byPeer: true });
    });
    serverCall.on('finish', () => this.finish('status sent'));
    serverCall.on('close', () => {
      this.settle({ code: 'UNAVAILABLE', reason: 'stream closed', byPeer: true });
      this.finish('stream closed');
    });
  }

  protected shutdown(code: ErrorCode | 'OK', reason: string): void {
    this.discardInput();
    this.endCall(code, reason);
  }

  /** Sends the final status once. grpc-js turns an 'error' event into that status. */
  private endCall(code: ErrorCode | 'OK', reason: string): void {
    if (this.ended || this.serverCall.cancelled) return;
    this.ended = true;
    if (code === 'OK') this.serverCall.end();
    else this.serverCall.emit('error', { code: ERROR_TABLE[code].grpc, details: reason });
  }

  protected onFinished(): void {}
}

/** Options of {@link GrpcClientChannel}. */
export interface GrpcClientChannelOptions extends GrpcChannelOptions {
  /** Called once when the call is over, e.g. to close the grpc-js client that owns the connection. */
  onFinished?: () => void;
}

/**
 * The dialing side of tether.v1.Gateway/Connect as a Channel; the only place that knows the
 * client call's events. Created by the gRPC dialer once the gateway accepted the stream.
 *
 * - close('OK') half-closes (the gateway answers with status OK); if no status arrives
 *   within closeTimeoutMs the call is cancelled. close(code) cancels at once (the gateway sees
 *   CANCELLED: a client cannot send a status).
 * - The gateway's status ends the channel (byPeer): OK, or its canonical code and details.
 *   A dropped connection arrives as UNAVAILABLE; a gateway cutting it (forceShutdown) as
 *   CANCELLED. Frames grpc-js had already buffered are still yielded before the end.
 */
export class GrpcClientChannel extends GrpcChannelBase {
  protected readonly copiesOnWrite = false;
  private readonly onDone: (() => void) | undefined;

  constructor(
    private readonly clientCall: ClientDuplexStream<GatewayFrame, GatewayFrame>,
    remote: string,
    opts: GrpcClientChannelOptions = {},
  ) {
    super(clientCall, remote, opts);
    this.onDone = opts.onFinished;
    const onStatus = (status: Pick<StatusObject, 'code' | 'details'>) => {
      this.drainReadable();
      this.settle(closeInfoFromStatus(status));
      this.finish('status received');
    };
    // grpc-js emits 'error' (non-OK only) and then 'status' for the same outcome.
    clientCall.on('error', (err: { code?: number; details?: string; message?: string }) =>
      onStatus({ code: typeof err.code === 'number' ? err.code : 14, details: err.details ?? err.message ?? '' }),
    );
    clientCall.on('status', onStatus);
    clientCall.on('close', () => {
      this.settle({ code: 'UNAVAILABLE', reason: 'stream closed', byPeer: true });
      this.finish('stream closed');
    });
  }

  protected shutdown(code: ErrorCode | 'OK'): void {
    this.discardInput();
    if (code !== 'OK') {
      this.clientCall.cancel();
      return;
    }
    // The gateway answers a half-close with status OK; the close timeout cancels otherwise.
    this.clientCall.end();
  }

  protected onFinished(): void {
    // A no-op once a status arrived; cuts the stream when the close timeout gave up on it.
    this.clientCall.cancel();
    this.onDone?.();
  }
}
