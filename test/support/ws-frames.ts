/** One WebSocket frame read off a raw socket: its opcode and its payload, unmasked. */
export interface WsFrame {
  opcode: number;
  payload: Buffer;
}

/**
 * Reads the WebSocket frames of one direction of a raw TCP connection, for tests that watch
 * or speak the wire by hand: skips the HTTP upgrade, then hands out each whole frame as its
 * bytes arrive (masks removed; uncompressed frames only, as Tether never negotiates
 * permessage-deflate).
 */
export class WsFrameReader {
  private buf = Buffer.alloc(0);
  /** Whether the HTTP upgrade is behind (frames follow it). */
  upgraded = false;

  /** Takes the next bytes; returns the frames they complete, in order. */
  feed(chunk: Buffer): WsFrame[] {
    this.buf = Buffer.concat([this.buf, chunk]);
    if (!this.upgraded) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return [];
      this.upgraded = true;
      this.buf = this.buf.subarray(end + 4);
    }
    const frames: WsFrame[] = [];
    for (let f = this.next(); f; f = this.next()) frames.push(f);
    return frames;
  }

  private next(): WsFrame | undefined {
    const buf = this.buf;
    if (buf.length < 2) return undefined;
    const masked = (buf[1] & 0x80) !== 0;
    let len = buf[1] & 0x7f;
    let off = 2;
    if (len === 126) {
      if (buf.length < 4) return undefined;
      len = buf.readUInt16BE(2);
      off = 4;
    } else if (len === 127) {
      if (buf.length < 10) return undefined;
      len = Number(buf.readBigUInt64BE(2));
      off = 10;
    }
    const mask = masked ? buf.subarray(off, off + 4) : undefined;
    if (mask) off += 4;
    if (buf.length < off + len) return undefined;
    const payload = Buffer.from(buf.subarray(off, off + len));
    if (mask) for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
    this.buf = buf.subarray(off + len);
    return { opcode: buf[0] & 0x0f, payload };
  }
}
