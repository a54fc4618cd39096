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
  /** The first attempt was made already, on `peer`, and failed with `error`: go on from the second. */
  after?: { peer: RpcPeer; error: TetherError };
}

/**
 * Makes `call` on the live peer, and again on the next connection when it fails with an error
 * `retry` accepts. The call must be idempotent on the gateway (an input id, a create id, an
 * attach or a stop), so doing it twice has the effect of doing it once. Between attempts it
 * waits for the dying link to close (or a short, growing pause), so retries go out on the
 * next connection instead of using up every attempt on the dying one.
 */
export async function acrossReconnects<T>(
  peer: () => Promise<RpcPeer>,
  call: (p: RpcPeer) => Promise<T>,
  opts: AcrossReconnectsOptions = {},
): Promise<T> {
  const until = Date.now() + (opts.withinMs ?? Infinity);
  const retry = opts.retry ?? isLinkLoss;
  /** After attempt `attempt` failed with `e` on `p`: throws when no other may follow, else waits before the next. */
  const failed = (e: TetherError, p: RpcPeer, attempt: number) => {
    if (!retry(e) || attempt >= (opts.attempts ?? 20) || Date.now() >= until) throw e;
    return Promise.race([p.channel.closed, new Promise((r) => setTimeout(r, Math.min(1_000, 25 * 2 ** attempt)))]);
  };
  let last = opts.after?.error;
  if (opts.after) await failed(opts.after.error, opts.after.peer, 0);
  for (let attempt = opts.after ? 1 : 0; ; attempt++) {
    // No next connection (the client closed, or gave up reconnecting): the cut is the answer.
    const p = last ? await peer().catch(() => Promise.reject(last)) : await peer();
    try {
      return await call(p);
    } catch (err) {
      last = asTetherError(err);
      await failed(last, p, attempt);
    }
  }
}

/**
 * {@link acrossReconnects} with its first attempt made at once on `live` (the peer of a link
 * that is up), without an async step: the hot path of a prompt. Only a failure goes the long way.
 */
export function atOnceThenAcrossReconnects<T>(
  live: RpcPeer,
  peer: () => Promise<RpcPeer>,
  call: (p: RpcPeer) => Promise<T>,
  opts: AcrossReconnectsOptions = {},
): Promise<T> {
  let first: Promise<T>;
  try {
    first = call(live);
  } catch (err) {
    first = Promise.reject(err);
  }
  return first.catch((err: unknown) => acrossReconnects(peer, call, { ...opts, after: { peer: live, error: asTetherError(err) } }));
}
