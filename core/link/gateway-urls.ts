import { TetherError } from '../errors.js';
import type { Dialers } from './dial.js';

/**
 * Where a link may dial: one gateway URL, a comma-separated list of them, or an array (each
 * entry may itself hold commas, as a repeated flag does). Several URLs are gateways of one
 * cluster (or one load-balanced address): the link dials them in turn.
 */
export type GatewayTargets = string | readonly string[];

/**
 * The URLs of `targets`, in order, each checked before anything is dialed. Throws
 * INVALID_ARGUMENT naming the bad entry (and its place in a list) or an empty list.
 * Duplicates are dropped: dialing the same gateway twice in a round only delays fail-over.
 * `dialers` says which schemes are known.
 */
export function gatewayUrls(targets: GatewayTargets, dialers: Dialers): string[] {
  const entries = (typeof targets === 'string' ? [targets] : [...targets]).flatMap((t) => t.split(',')).map((t) => t.trim());
  const urls = entries.filter((t) => t !== '');
  if (urls.length === 0)
    throw new TetherError(
      'INVALID_ARGUMENT',
      'no gateway URL given (expected ws://HOST:PORT, wss://, grpc:// or grpcs://; several separated by commas)',
    );
  urls.forEach((raw, i) => {
    try {
      dialers.parse(raw);
    } catch (err) {
      if (urls.length === 1) throw err;
      throw new TetherError('INVALID_ARGUMENT', `gateway URL ${i + 1} of ${urls.length}: ${(err as Error).message}`);
    }
  });
  return [...new Set(urls)];
}
