/**
 * JSON text as UTF-8 pieces that form one message in order: a large frame built around bytes it
 * does not copy (an engine line as the agent sent it). Sent and received like the joined text:
 * WebSocket writes the pieces as they are behind one frame head of its own (core/channel/ws.ts),
 * other transports get them joined, once per frame however many channels send it ({@link TextPieces.joined}).
 */
export class TextPieces {
  readonly byteLength: number;
  private whole: Buffer | undefined;

  /** `alloc` makes the Buffer they are joined into (e.g. one with headroom for a transport's prefix). */
  constructor(
    readonly pieces: readonly Uint8Array[],
    private readonly alloc: (bytes: number) => Buffer = Buffer.allocUnsafe,
  ) {
    this.byteLength = pieces.reduce((n, p) => n + p.byteLength, 0);
  }

  /** The pieces as one Buffer, joined on the first call and kept for the next. */
  joined(): Buffer {
    if (this.whole) return this.whole;
    const whole = this.alloc(this.byteLength);
    let at = 0;
    for (const piece of this.pieces) {
      whole.set(piece, at);
      at += piece.byteLength;
    }
    return (this.whole = whole);
  }
}
