import type { WebSocket } from 'ws';
import { codeFromWsClose, ERROR_TABLE, type ErrorCode } from '../errors.js';
import { decodeBinaryFrame, encodeBinaryFrame, encodeBinaryHead, UNJOINED_MIN_BYTES } from '../wire/binary-frame.js';
import { wsFrameHead, WS_OPCODE, type FrameMasking } from '../wire/ws-frame-head.js';
import { BaseChannel, type BaseChannelOptions, type Transport } from './channel.js';
import { EndOfTurn, type TurnEnd } from './end-of-turn.js';
import type { BinaryFrame, OutgoingFrame } from '../wire/frame.js';
import type { TextPieces } from '../wire/text-pieces.js';

/** Protocol-level ping defaults of both ends of a WebSocket link (threats.md part 3). */
export const WS_PING_DEFAULTS = {
  /** Ping after this long (15 s). */
  pingIntervalMs: 15_000,
  /** Declare the socket dead when a ping is not answered within this (10 s). */
  pingTimeoutMs: 10_000,
} as const;

export interface WsChannelOptions extends BaseChannelOptions {
  /** Protocol-level ping interval (a backstop under the application heartbeat); 0 disables. */
  pingIntervalMs?: number;
  /** Time without a pong after a ping before the socket is declared dead. */
  pingTimeoutMs?: number;
  /** How long close() waits for the peer's close frame before destroying the socket. */
  closeTimeoutMs?: number;
  /**
   * The TCP (or TLS) socket under the WebSocket: its bytes read show a frame still arriving,
   * and corking it batches the frames posted in one turn of the event loop into one write.
   */
  socket?: WsSocket;
  /**
   * Whether this side may write a large message as one frame of its own, its pieces unjoined
   * (ws-frame-head.ts): `none` for a server's unmasked frames, `zero-key` for a client's where
   * masking protects nothing (dial-ws.ts needsMasking). Unset: every frame goes through ws.
   */
  masking?: FrameMasking;
  /**
   * Where this channel lists itself to be uncorked at the end of a turn: a listener hands one
   * to all its channels, so one tick uncorks them all. Default: one of its own.
   */
  endOfTurn?: EndOfTurn;
}

/** What the channel uses of the socket under the WebSocket. */
export interface WsSocket {
  readonly bytesRead: number;
  cork?(): void;
  uncork?(): void;
  write?(chunk: Uint8Array, cb?: (err?: Error | null) => void): boolean;
}

/** WebSocket close codes of RFC 6455 that we map to canonical codes. */
const RFC_CLOSE: Record<number, ErrorCode | 'OK'> = {
  1000: 'OK',
  1001: 'UNAVAILABLE',
  1006: 'UNAVAILABLE',
  1008: 'PERMISSION_DENIED',
  1009: 'RESOURCE_EXHAUSTED',
  1011: 'INTERNAL',
  1002: 'INVALID_ARGUMENT',
  1007: 'INVALID_ARGUMENT',
};

/** Send options for JSON text already encoded as UTF-8: a text message, bytes as they are. */
const TEXT = { binary: false } as const;

/** Wraps an open `ws` socket as a Channel. The only place that knows ws's event names. */
export class WsChannel extends BaseChannel implements TurnEnd {
  readonly transport: Transport = 'ws';
  private pingTimer: NodeJS.Timeout | undefined;
  private pongDeadline: NodeJS.Timeout | undefined;
  private readonly closeTimeoutMs: number;
  private readonly socket: WsSocket | undefined;
  /** Whether posted frames are being held for one write at the end of this turn. */
  private corked = false;
  /** What the socket held when this turn's cork began. */
  private heldAtCork = 0;
  private readonly masking: FrameMasking | undefined;
  private readonly endOfTurn: EndOfTurn;

  constructor(
    private readonly ws: WebSocket,
    readonly remote: string,
    opts: WsChannelOptions = {},
  ) {
    super(opts);
    this.closeTimeoutMs = opts.closeTimeoutMs ?? 5_000;
    this.socket = opts.socket;
    this.masking = opts.masking;
    this.endOfTurn = opts.endOfTurn ?? new EndOfTurn();
    ws.on('message', (data, isBinary) => {
      if (!isBinary) {
        this.push(data.toString());
        return;
      }
      try {
        this.push(decodeBinaryFrame(data as Buffer));
      } catch (err) {
        this.close('INVALID_ARGUMENT', (err as Error).message);
      }
    });
    ws.on('close', (code, reason) => {
      this.stopPing();
      const text = reason.toString() || (code === 1006 ? 'connection lost' : `closed (${code})`);
      this.settle({ code: codeFromWsClose(code) ?? RFC_CLOSE[code] ?? 'UNAVAILABLE', reason: text, byPeer: true });
    });
    ws.on('error', (err: Error & { code?: string }) => {
      // 'close' always follows 'error' in ws. But when ws refuses an incoming frame (over
      // maxPayload, invalid UTF-8, bad opcode…) it sends the close frame itself and stops
      // reading, so 'close' only reports 1006: settle with the real cause here.
      if (!err.code?.startsWith('WS_ERR_')) return;
      this.stopPing();
      const code = err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 'RESOURCE_EXHAUSTED' : 'INVALID_ARGUMENT';
      this.settle({ code, reason: err.message, byPeer: false });
    });
    const interval = opts.pingIntervalMs ?? 0;
    if (interval > 0) this.startPing(interval, opts.pingTimeoutMs ?? interval);
  }

  /** While this turn's frames are corked: what was held before them (they go out at its end). */
  get bufferedBytes(): number {
    return this.corked ? this.heldAtCork : this.ws.bufferedAmount;
  }

  override get receivedBytes(): number {
    return this.socket?.bytesRead ?? super.receivedBytes;
  }

  /**
   * No callback: ws reports a failed write by closing the socket, which settles `closed`.
   * Frames posted in one turn of the event loop (a burst read from the agent, relayed to this
   * client) leave in one writev at its end instead of one syscall each: the socket is corked
   * on the first post and uncorked on the next tick. Until then `bufferedBytes` reports what
   * the socket held before the turn: a client that reads is not taken for a slow consumer
   * because one turn's frames wait for the turn to end; a client that does not read shows
   * its backlog from the next turn on (the budget holds, plus one turn's frames).
   */
  protected override writeNoWait(frame: OutgoingFrame): void {
    this.corkTurn();
    if (typeof frame === 'string') this.ws.send(frame);
    else if (frame instanceof Uint8Array) this.ws.send(frame, TEXT);
    else this.sendBinary(frame);
  }

  /** Text pieces as one text message, batched with the turn's other frames like writeNoWait. */
  protected override writePieces(frame: TextPieces): void {
    this.corkTurn();
    if (!this.writeFrame(WS_OPCODE.text, frame.pieces)) this.ws.send(frame.joined(), TEXT);
  }

  /** Corks the socket at the first frame of a turn; the end of the turn uncorks it (one writev). */
  private corkTurn(): void {
    if (!this.corked && this.socket?.cork) {
      this.heldAtCork = this.ws.bufferedAmount;
      this.corked = true;
      this.socket.cork();
      this.endOfTurn.add(this);
    }
  }

  /** A binary frame as one message: a large body is written as it is, after its head (writeFrame), where this side may. */
  private sendBinary(frame: BinaryFrame, done?: (err?: Error) => void): void {
    if (frame.body.byteLength >= UNJOINED_MIN_BYTES && this.writeFrame(WS_OPCODE.binary, [encodeBinaryHead(frame), frame.body], done))
      return;
    if (done) this.ws.send(encodeBinaryFrame(frame), done);
    else this.ws.send(encodeBinaryFrame(frame));
  }

  /**
   * Writes one message as one frame of our own: its head, then `parts` as they are, straight to
   * the socket (no copy, no masking pass). Only where this side may (`masking`) and while the
   * WebSocket is open; false, having written nothing, otherwise. Ordered with ws's own writes:
   * ws writes to the socket at once (no compression, no Blobs on our sockets).
   */
  private writeFrame(opcode: number, parts: readonly Uint8Array[], done?: (err?: Error) => void): boolean {
    const socket = this.socket;
    if (!this.masking || !socket?.write || this.ws.readyState !== this.ws.OPEN) return false;
    let bytes = 0;
    for (const part of parts) bytes += part.byteLength;
    const cork = !this.corked && socket.cork && socket.uncork; // one writev for the head and parts
    if (cork) socket.cork!();
    socket.write(wsFrameHead(opcode, bytes, this.masking));
    const last = parts.length - 1;
    parts.forEach((part, i) => (i === last && done ? socket.write!(part, (err) => done(err ?? undefined)) : socket.write!(part)));
    if (cork) socket.uncork!();
    return true;
  }

  /** The end of a turn this channel corked in (its EndOfTurn calls it): this turn's frames leave in one write. */
  endTurn(): void {
    this.corked = false;
    try {
      this.socket?.uncork?.();
    } catch (err) {
      // One socket's failure must not leave the others of the turn corked.
      this.close('INTERNAL', `writing to the socket failed: ${String(err)}`);
    }
  }

  protected write(frame: OutgoingFrame): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (err?: Error) => (err ? reject(err) : resolve());
      if (typeof frame === 'string') this.ws.send(frame, done);
      else if (frame instanceof Uint8Array) this.ws.send(frame, TEXT, done);
      else this.sendBinary(frame, done);
    });
  }

  protected shutdown(code: ErrorCode | 'OK', reason: string): void {
    this.stopPing();
    // If the reader had paused us, read on (frames are discarded after close) so the peer's
    // close reply, queued behind its data, arrives and the handshake ends now, not at terminate.
    this.ws.resume();
    const wsCode = code === 'OK' ? 1000 : ERROR_TABLE[code].wsClose;
    try {
      // Close reasons are limited to 123 bytes by RFC 6455.
      this.ws.close(wsCode, Buffer.from(reason).subarray(0, 120).toString());
    } catch {
      this.ws.terminate();
    }
    setTimeout(() => this.ws.terminate(), this.closeTimeoutMs).unref();
  }

  protected pauseInput(): void {
    this.ws.pause();
  }

  protected resumeInput(): void {
    this.ws.resume();
  }

  private startPing(intervalMs: number, timeoutMs: number): void {
    this.ws.on('pong', () => {
      clearTimeout(this.pongDeadline);
      this.pongDeadline = undefined;
    });
    const armed = () => {
      const received = this.receivedBytes;
      const backlog = this.bufferedBytes;
      this.pongDeadline = setTimeout(() => {
        // A pong queued behind the peer's data, or our ping behind ours: the peer is slow,
        // not dead, while its bytes kept arriving or ours kept draining. Wait on.
        if (this.receivedBytes > received || (backlog > 0 && this.bufferedBytes < backlog)) return armed();
        this.ws.terminate();
        this.settle({ code: 'UNAVAILABLE', reason: `no pong within ${timeoutMs} ms`, byPeer: true });
      }, timeoutMs);
    };
    this.pingTimer = setInterval(() => {
      if (this.pongDeadline) return;
      this.ws.ping();
      armed();
    }, intervalMs);
    this.pingTimer.unref();
  }

  private stopPing(): void {
    clearInterval(this.pingTimer);
    clearTimeout(this.pongDeadline);
  }
}
