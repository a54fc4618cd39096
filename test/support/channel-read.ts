import type { Channel, WireFrame } from '../../core/channel/channel.js';

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
