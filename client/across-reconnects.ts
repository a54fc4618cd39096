import { asTetherError, type TetherError } from '../core/errors.js';
import type { RpcPeer } from '../core/rpc/peer.js';

/** Errors that say the call was cut off by the link (or its answer was), not refused. */
export function isLinkLoss(e: TetherError): boolean {
  return e.code === 'UNAVAILABLE' || e.code === 'DEADLINE_EXCEEDED';
}

export interface AcrossReconnectsOptions {
  /** Which errors are worth another attempt (default: {@link isLinkLoss}). */
  retry?: (e: TetherError) => boolean;
  /** Attempts after the first (default 20). */
  attempts?: number;
  /** No new attempt starts after this long (ms, default no bound beyond `attempts`). */
  withinMs?: number;
}

/**
 * Makes `call` on the live peer, and again on the next connection when it fails with an error
 * `retry` accepts. The call must be idempotent on the gateway (an input id, a create id, an
 * attach or a stop), so doing it twice has the effect of doing it once. Between attempts it
 * waits for the dying link to close (or a short, growing pause), so retries go out on the
 * next connection instead of using up every attempt on the dying one.
 */
export async function acrossReconnects<T>(peer: () => Promise<RpcPeer>, call: (p: RpcPeer) => Promise<T>, opts: AcrossReconnectsOptions = {}): Promise<T> {
  const until = Date.now() + (opts.withinMs ?? Infinity);
  const retry = opts.retry ?? isLinkLoss;
  let last: TetherError | undefined;
  for (let attempt = 0; ; attempt++) {
    // No next connection (the client closed, or gave up reconnecting): the cut is the answer.
    const p = last ? await peer().catch(() => Promise.reject(last)) : await peer();
    try {
      return await call(p);
    } catch (err) {
      const e = asTetherError(err);
      if (!retry(e) || attempt >= (opts.attempts ?? 20) || Date.now() >= until) throw e;
      last = e;
      await Promise.race([p.channel.closed, new Promise((r) => setTimeout(r, Math.min(1_000, 25 * 2 ** attempt)))]);
    }
  }
}
