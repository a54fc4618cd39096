/**
 * The head of one WebSocket frame (RFC 6455 §5.2) that carries a whole message, for a message
 * written as several buffers with no copy into one: the head, then the payload's pieces as they
 * are. No extension bits (permessage-deflate is off on every socket we open).
 */

/** The opcodes we write this way. */
export const WS_OPCODE = { text: 0x1, binary: 0x2 } as const;

/**
 * How the frames of one side are masked: a server's are not; a client's by the zero key, only
 * over TLS or loopback (a deviation from RFC 6455 §5.3, safe only there: see dial-ws.ts needsMasking).
 */
export type FrameMasking = 'none' | 'zero-key';

/**
 * FIN, the opcode, the payload length (7 bits, or 16 or 64 bits after it) and, for a client, the
 * mask bit with a zero masking key: XOR with zero leaves the payload as it is, so the pieces that
 * follow need no masking pass and no copy.
 */
export function wsFrameHead(opcode: number, payloadBytes: number, masking: FrameMasking): Buffer {
  const lengthBytes = payloadBytes < 126 ? 0 : payloadBytes < 65_536 ? 2 : 8;
  const keyBytes = masking === 'zero-key' ? 4 : 0;
  const head = Buffer.alloc(2 + lengthBytes + keyBytes); // zeroed: the key, when present, is 0
  head[0] = 0x80 | opcode;
  const maskBit = keyBytes ? 0x80 : 0;
  if (lengthBytes === 0) head[1] = maskBit | payloadBytes;
  else if (lengthBytes === 2) {
    head[1] = maskBit | 126;
    head.writeUInt16BE(payloadBytes, 2);
  } else {
    head[1] = maskBit | 127;
    head.writeUIntBE(payloadBytes, 4, 6); // the top two bytes stay 0: payloads stay far below 2^48
  }
  return head;
}
