/**
 * ws's frame builder (ws/lib/sender.js, exported by ws as `Sender`), which @types/ws does not
 * declare: only the static `frame` the tests compare our own WebSocket frame heads against.
 */
import 'ws';

declare module 'ws' {
  interface SenderFrameOptions {
    fin?: boolean;
    rsv1?: boolean;
    opcode: number;
    mask?: boolean;
    /** Fills the 4-byte masking key (ws draws a random one without it). */
    generateMask?: (mask: Buffer) => void;
    maskBuffer?: Buffer;
    readOnly?: boolean;
  }

  // biome-ignore lint/complexity/noStaticOnlyClass: declares ws's own class as it is
  export class Sender {
    /** The frame for `data`: its head first, then the payload unless it was copied behind the head. */
    static frame(data: Buffer, options: SenderFrameOptions): Buffer[];
  }
}
