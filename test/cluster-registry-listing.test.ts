/**
 * The cluster registry's list of live gateways is bounded in time: a NATS KV key listing can
 * wait without end, and a create forwarded to another gateway (and every fleet list) asks for
 * this list first. Past the bound it says UNAVAILABLE and stops the listing; the callers fall
 * back on the last list they had (Cluster.fleet, Cluster.announce).
 */
import type { KV } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { ClusterRegistry } from '../gateway/cluster/registry.js';
import type { FabricMac } from '../gateway/cluster/fabric-mac.js';
import { silentLogger } from '../core/logging.js';
import { waitFor, withTimeout } from './support/wait.js';

type Iter = Awaited<ReturnType<KV['keys']>>;

/** A gateways bucket whose key listing yields `keys` and then ends, or never ends (`hang`). */
function bucket(keys: string[], hang: boolean) {
  const state = { stopped: false };
  const iter = {
    async *[Symbol.asyncIterator]() {
      for (const k of keys) yield k;
      if (hang) await new Promise(() => {}); // a listing whose end never comes
    },
    stop: () => {
      state.stopped = true;
    },
  } as unknown as Iter;
  const kv = { keys: async () => iter, get: async () => null } as unknown as KV;
  return { kv, state };
}

const registryOver = (gateways: KV, timeoutMs: number) =>
  new (ClusterRegistry as unknown as new (s: KV, g: KV, mac: FabricMac, log: typeof silentLogger, t: number) => ClusterRegistry)(
    {} as KV,
    gateways,
    {} as FabricMac,
    silentLogger,
    timeoutMs,
  );

describe('ClusterRegistry.liveGateways', () => {
  it('answers once the listing ends', async () => {
    const { kv, state } = bucket(['gw-a', 'gw-b'], false);
    await expect(withTimeout(registryOver(kv, 1_000).liveGateways(), 5_000, 'the list')).resolves.toEqual([]);
    expect(state.stopped).toBe(false);
  });

  it('says UNAVAILABLE and stops the listing when it does not end within its bound', async () => {
    const { kv, state } = bucket(['gw-a'], true);
    const err = await withTimeout(registryOver(kv, 100).liveGateways(), 5_000, 'the bound').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringMatching(/did not list the gateways within 100 ms/) });
    expect(state.stopped).toBe(true);
  });

  it('stops a listing that only begins after the bound', async () => {
    const { kv: inner, state } = bucket(['gw-a'], false);
    let begin!: () => void;
    const began = new Promise<void>((r) => (begin = r));
    const kv = { keys: () => began.then(() => inner.keys()), get: inner.get } as unknown as KV;
    const err = await withTimeout(registryOver(kv, 50).liveGateways(), 5_000, 'the bound').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UNAVAILABLE' });
    expect(state.stopped).toBe(false); // nothing to stop yet
    begin();
    await waitFor(() => state.stopped, 5_000, 'the late listing to be stopped');
  });
});
