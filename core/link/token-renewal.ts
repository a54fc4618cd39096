import { asTetherError } from '../errors.js';
import { silentLogger, type Logger } from '../logging.js';
import type { RpcPeer } from '../rpc/peer.js';

/**
 * Where a long-lived link gets its token: called on every (re)connect and before the token
 * expires on a live link. Reading a file that an operator or a job replaces (`--token-file`)
 * or minting one (a library callback) both fit. Throwing (or returning the token in use)
 * just defers the renewal.
 */
export type TokenSource = () => string | Promise<string>;

/** A live link renews once this fraction of its token's remaining lifetime has passed. */
export const RENEW_AT_FRACTION = 0.75;
/** Shortest wait before another try after a renewal could not happen. */
export const MIN_RENEW_RETRY_MS = 1_000;
/** Longest single timer (setTimeout overflows past 2^31-1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Keeps one connection's token fresh: at {@link RENEW_AT_FRACTION} of the remaining lifetime
 * it asks `source` for a token and, if that is a new one, sends `auth.renew`; the gateway
 * answers with the new expiry and the cycle repeats. Failures (source throws, same token,
 * refusal) are logged at warn and retried at half the time left, never after the expiry (the
 * gateway then closes the connection with UNAUTHENTICATED, and the next dial takes a fresh
 * token from the source). `onRenewed` hears each token in use. Stops when the channel closes
 * or the returned function is called.
 */
export function startTokenRenewal(
  peer: RpcPeer,
  source: TokenSource,
  opts: { token: string; expiresAt: string; logger?: Logger; onRenewed?: (token: string) => void },
): () => void {
  const log = opts.logger ?? silentLogger;
  let token = opts.token;
  let expiresAtMs = Date.parse(opts.expiresAt);
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const stop = () => {
    stopped = true;
    clearTimeout(timer);
  };
  const schedule = (delayMs: number) => {
    if (stopped) return;
    timer = setTimeout(attempt, Math.min(MAX_TIMER_MS, Math.max(0, delayMs)));
    timer.unref();
  };
  const retry = (why: string) => {
    const left = expiresAtMs - Date.now();
    if (left <= MIN_RENEW_RETRY_MS) {
      log.warn({ why }, 'token not renewed before it expires: the gateway will close the link');
      return;
    }
    log.warn({ why, retryInMs: Math.round(left / 2) }, 'token renewal deferred');
    schedule(Math.max(MIN_RENEW_RETRY_MS, left / 2));
  };
  const attempt = async () => {
    if (stopped) return;
    let fresh: string;
    try {
      fresh = (await source()).trim();
    } catch (err) {
      return retry(`token source failed: ${asTetherError(err).message}`);
    }
    if (fresh === token) return retry('the token source still gives the token in use');
    try {
      const r = await peer.request('auth.renew', { token: fresh });
      token = fresh;
      expiresAtMs = Date.parse(r.expires_at);
      opts.onRenewed?.(fresh);
      log.info({ expiresAt: r.expires_at }, 'token renewed');
      schedule((expiresAtMs - Date.now()) * RENEW_AT_FRACTION);
    } catch (err) {
      if (peer.channel.isClosed) return;
      retry(`gateway refused the renewal: ${asTetherError(err).message}`);
    }
  };
  if (Number.isFinite(expiresAtMs)) schedule((expiresAtMs - Date.now()) * RENEW_AT_FRACTION);
  void peer.channel.closed.then(stop);
  return stop;
}
