/**
 * acrossReconnects and its hot-path form atOnceThenAcrossReconnects (client/across-reconnects.ts):
 * the first attempt on a live peer goes out at once (no async step before it), and a failure
 * then goes the same way as with acrossReconnects: retried on the next connection within the
 * same number of attempts, or thrown when it may not be retried.
 */
import { describe, expect, it } from 'vitest';
import { memoryChannelPair } from '../core/channel/memory.js';
import { TetherError } from '../core/errors.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { acrossReconnects, atOnceThenAcrossReconnects } from '../client/across-reconnects.js';

const peerPair = () => new RpcPeer(memoryChannelPair()[0]);

/** A call that fails with `errors` in turn (closing the peer it failed on), then answers 'ok'. */
function scripted(errors: TetherError[]) {
  const seen: RpcPeer[] = [];
  const call = (p: RpcPeer): Promise<string> => {
    seen.push(p);
    const e = errors.shift();
    if (!e) return Promise.resolve('ok');
    p.channel.close('UNAVAILABLE', 'cut');
    return Promise.reject(e);
  };
  return { seen, call };
}

describe('atOnceThenAcrossReconnects', () => {
  it('makes the first attempt on the live peer before returning', () => {
    const live = peerPair();
    const { seen, call } = scripted([]);
    const answer = atOnceThenAcrossReconnects(live, () => Promise.resolve(peerPair()), call);
    expect(seen).toEqual([live]);
    return expect(answer).resolves.toBe('ok');
  });

  it('retries a link loss on the next connections exactly as acrossReconnects does, within the same attempts', async () => {
    const lost = () => new TetherError('UNAVAILABLE', 'link lost');
    for (const attempts of [0, 1, 3]) {
      const hot = scripted([lost(), lost(), lost()]);
      const cold = scripted([lost(), lost(), lost()]);
      const live = peerPair();
      const next = () => Promise.resolve(peerPair());
      const a = await atOnceThenAcrossReconnects(live, next, hot.call, { attempts }).catch((e: TetherError) => e.code);
      const b = await acrossReconnects(() => Promise.resolve(cold.seen.length ? peerPair() : live), cold.call, { attempts }).catch(
        (e: TetherError) => e.code,
      );
      expect(a).toBe(b);
      expect(hot.seen.length).toBe(cold.seen.length);
      expect(hot.seen[0]).toBe(live);
      expect(new Set(hot.seen).size).toBe(hot.seen.length); // each attempt on a connection of its own
    }
  });

  it('throws a refusal at once, asking for no other connection', async () => {
    let asked = 0;
    const { seen, call } = scripted([new TetherError('PERMISSION_DENIED', 'no')]);
    await expect(atOnceThenAcrossReconnects(peerPair(), () => (asked++, Promise.resolve(peerPair())), call)).rejects.toMatchObject({
      code: 'PERMISSION_DENIED',
    });
    expect([seen.length, asked]).toEqual([1, 0]);
  });
});
