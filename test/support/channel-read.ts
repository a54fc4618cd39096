import type { Channel } from '../../core/channel/channel.js';
import type { WireFrame } from '../../core/wire/frame.js';

/** The next `n` frames a channel yields (fewer if it ends, or when `ms` passes first). */
export async function receiveFrames(channel: Channel, n: number, ms = 5_000): Promise<WireFrame[]> {
  const out: WireFrame[] = [];
  const it = channel[Symbol.asyncIterator]();
  const deadline = setTimeout(() => void it.return?.(), ms);
  try {
    while (out.length < n) {
      const next = await it.next();
      if (next.done) break;
      out.push(next.value);
    }
  } finally {
    clearTimeout(deadline);
  }
  return out;
}

/** A frame that must be JSON text (what the gateway answers a JSON-RPC peer with); throws on a binary frame. */
export function textFrame(frame: WireFrame): string {
  if (typeof frame !== 'string') throw new Error(`expected a text frame, got a binary one (header ${frame.header})`);
  return frame;
}
