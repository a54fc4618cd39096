/**
 * JSON text as UTF-8 pieces that form one message in order: a large frame built around bytes it
 * does not copy (an engine line as the agent sent it). Sent and received like the joined text;
 * WebSocket writes the pieces as fragments of one message, other transports get them joined,
 * once per frame however many channels send it ({@link TextPieces.joined}).
 */
export class TextPieces {
  readonly byteLength: number;
  private whole: Buffer | undefined;

  constructor(readonly pieces: readonly Uint8Array[]) {
    this.byteLength = pieces.reduce((n, p) => n + p.byteLength, 0);
  }

  /** The pieces as one Buffer, joined on the first call and kept for the next. */
  joined(): Buffer {
    return (this.whole ??= Buffer.concat(this.pieces, this.byteLength));
  }
}
