/**
 * WebSocket write batching: the frames a channel posts in one turn of the event loop (a burst
 * relayed to a client, a burst of engine lines to the gateway) leave in one socket write at the
 * end of the turn, not one syscall each; `bufferedBytes` leaves the turn's own frames out until
 * then, so a reading peer is not mistaken for a slow consumer, and the frames arrive in order.
 */
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Channel } from '../core/channel/channel.js';
import { PAIR_FACTORIES, type ChannelPair } from './support/channel-pairs.js';
import { receiveFrames } from './support/channel-read.js';

const FRAMES = 200;

/** Counts the writes the socket under a WsChannel hands to the kernel (test-only reach into privates). */
function countWrites(channel: Channel): { writes: number } {
  const socket = (channel as unknown as { socket?: Socket }).socket;
  if (!socket) throw new Error('no socket under this channel');
  const counter = { writes: 0 };
  const s = socket as unknown as Record<'_write' | '_writev', (...args: unknown[]) => void>;
  for (const name of ['_write', '_writev'] as const) {
    const original = s[name].bind(socket);
    s[name] = (...args: unknown[]) => {
      counter.writes++;
      original(...args);
    };
  }
  return counter;
}

describe('WebSocket write batching', () => {
  let pair: ChannelPair | undefined;
  afterEach(() => pair?.cleanup());

  for (const side of ['server', 'client'] as const) {
    it(`frames posted in one turn leave in one write, in order (${side} side)`, async () => {
      pair = await PAIR_FACTORIES.ws();
      const from = pair[side];
      const to = side === 'server' ? pair.client : pair.server;
      const writes = countWrites(from);
      const frames = Array.from(
        { length: FRAMES },
        (_, i) => `{"jsonrpc":"2.0","method":"n","params":{"i":${i},"pad":"${'x'.repeat(100)}"}}`,
      );
      const before = from.bufferedBytes;
      for (const f of frames) expect(from.post(Buffer.from(f))).toBe(true);
      // The turn's frames are held for one write at its end; the budget still sees the backlog before it.
      expect(from.bufferedBytes).toBe(before);
      expect(writes.writes).toBe(0);
      const got = await receiveFrames(to, FRAMES);
      expect(got).toEqual(frames);
      expect(writes.writes).toBe(1);
    });
  }
});
