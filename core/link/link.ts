import { asTetherError, TetherError } from '../errors.js';
import { silentLogger, type Logger } from '../logging.js';
import type { ParamsOf, ResultOf } from '../protocol/methods.js';
import { assertCompatible } from '../protocol/version.js';
import { RpcPeer } from '../rpc/peer.js';
import { backoffDelay, CLIENT_BACKOFF, type BackoffPolicy } from '../util/backoff.js';
import type { DialOptions, Dialers } from './dial.js';
import { gatewayUrls, type GatewayTargets } from './gateway-urls.js';
import { HEARTBEAT_DEFAULTS, startHeartbeat, type HeartbeatOptions } from './heartbeat.js';
import { startTokenRenewal, type TokenSource } from './token-renewal.js';

/** With failFast: first connections made and then lost before their hello, tried again. */
export const FLAKY_FIRST_CONNECT_RETRIES = 3;

/**
 * The link's state, as a tagged union. `url` is the gateway dialed (or that failed); `nextUrl`
 * the one the next attempt dials (another gateway of the list after a failure).
 */
export type LinkStatus =
  | { state: 'connecting'; attempt: number; url: string }
  | { state: 'connected'; peer: RpcPeer; hello: ResultOf<'hello'>; url: string }
  | { state: 'down'; error: TetherError; retryInMs: number; url: string; nextUrl: string }
  | { state: 'closed'; error?: TetherError };

export interface LinkOptions {
  /**
   * The gateway, or several (a list, or one string with commas): after a failed dial or a
   * dropped link the next attempt dials the next URL, so the link fails over between the
   * gateways of a cluster. All are checked at start(); a bad one fails it, named.
   */
  url: GatewayTargets;
  /** The transports this link may dial, built by the program's composition root. */
  dialers: Dialers;
  dial?: DialOptions;
  logger?: Logger;
  backoff?: BackoffPolicy;
  /** The hello to send on every (re)connect; called each time so it can carry resume state. */
  hello: () => ParamsOf<'hello'>;
  /** Called with each new peer before the hello goes out: register handlers here. */
  setup?: (peer: RpcPeer) => void;
  /** Called after each successful hello: resume here. */
  onConnected?: (peer: RpcPeer, hello: ResultOf<'hello'>) => void | Promise<void>;
  onStatus?: (status: LinkStatus) => void;
  /**
   * Give up on the first attempt (with several URLs: once each has failed) instead of
   * retrying (for one-shot commands). Default false.
   * A first connection that was made and then lost before its hello finished is still tried
   * again, up to FLAKY_FIRST_CONNECT_RETRIES times: that is a flaky link, not an absent gateway.
   */
  failFast?: boolean;
  requestTimeoutMs?: number;
  /** Application-level liveness (default: ping every 15 s, dead after 10 s without an answer). */
  heartbeat?: HeartbeatOptions;
  /**
   * Where the token comes from, instead of `dial.token`: asked on every dial, and before the
   * token expires on a live link (auth.renew, see token-renewal.ts).
   */
  tokenSource?: TokenSource;
}

/**
 * One outbound link to the gateway that stays up: dial → hello → run → backoff → again,
 * until close(). Used by the agent and by clients alike. Errors that retrying cannot fix
 * (bad token, incompatible version) end the link instead of looping. With several gateway
 * URLs each retry dials the next one; the backoff grows once per round of the list.
 */
export class Link {
  private current: RpcPeer | undefined;
  private closing = false;
  private wakeSleep: (() => void) | undefined;
  private loopDone: Promise<void> | undefined;
  private readonly log: Logger;
  private firstResult: { resolve: () => void; reject: (e: TetherError) => void } | undefined;
  private urls: string[] = [];

  constructor(private readonly opts: LinkOptions) {
    this.log = opts.logger ?? silentLogger;
  }

  /** The live peer, if connected. */
  get peer(): RpcPeer | undefined {
    return this.current;
  }

  /** Starts the loop; resolves after the first successful hello, rejects if that cannot happen. */
  start(): Promise<void> {
    try {
      this.urls = gatewayUrls(this.opts.url, this.opts.dialers);
    } catch (err) {
      return Promise.reject(asTetherError(err, 'INVALID_ARGUMENT'));
    }
    return new Promise((resolve, reject) => {
      this.firstResult = { resolve, reject };
      this.loopDone = this.loop();
    });
  }

  /** Stops reconnecting and closes the current connection. Idempotent. */
  async close(): Promise<void> {
    this.closing = true;
    this.wakeSleep?.();
    this.current?.channel.close('OK', 'client closing');
    await this.loopDone;
  }

  private status(s: LinkStatus): void {
    this.opts.onStatus?.(s);
  }

  private async loop(): Promise<void> {
    let attempt = 0;
    let flakyRetries = 0;
    const round = new FailedRound(this.urls);
    while (!this.closing) {
      const url = round.url;
      this.status({ state: 'connecting', attempt, url });
      let error: TetherError;
      let dialed = false;
      try {
        const token = this.opts.tokenSource ? await this.opts.tokenSource() : this.opts.dial?.token;
        const channel = await this.opts.dialers.dial(url, { ...this.opts.dial, token });
        dialed = true;
        // close() came while dialing: it could not close a channel it did not have yet.
        if (this.closing) {
          channel.close('OK', 'client closing');
          break;
        }
        const peer = new RpcPeer(channel, { logger: this.log, requestTimeoutMs: this.opts.requestTimeoutMs });
        // The gateway's heartbeat pings us too; without an answer it would cut the link.
        peer.onRequest('ping', () => ({}));
        this.opts.setup?.(peer);
        const running = peer.run();
        const hello = await peer.request('hello', this.opts.hello(), { timeoutMs: 10_000 }).catch((err) => {
          channel.close('OK', 'hello failed');
          throw err;
        });
        if (this.closing) {
          // close() came during the hello: nothing closed this channel, and awaiting it would wait forever.
          channel.close('OK', 'client closing');
          await running;
          break;
        }
        assertCompatible(hello.protocol_version);
        this.current = peer;
        attempt = 0;
        round.connected();
        startHeartbeat(peer, this.opts.heartbeat ?? HEARTBEAT_DEFAULTS, (reason) => {
          this.log.warn({ reason }, 'gateway stopped answering; reconnecting');
          channel.close('UNAVAILABLE', reason);
        });
        if (this.opts.tokenSource && token && hello.token_expires_at) {
          startTokenRenewal(peer, this.opts.tokenSource, { token, expiresAt: hello.token_expires_at, logger: this.log });
        }
        await this.opts.onConnected?.(peer, hello);
        this.status({ state: 'connected', peer, hello, url });
        this.firstResult?.resolve();
        this.firstResult = undefined;
        const info = await running;
        this.current = undefined;
        if (this.closing) break;
        if (info.code === 'ABORTED') {
          // Superseded: a newer connection took over this identity. Retrying would fight it.
          this.status({ state: 'closed', error: new TetherError('ABORTED', `link taken over: ${info.reason}`) });
          this.closing = true;
          return;
        }
        // Cut for an expired token (a renewal missed: a suspended machine, a loaded one): with a
        // token source the next dial reads a fresh token, so that is a drop, not the end.
        const expired = info.code === 'UNAUTHENTICATED' && this.opts.tokenSource !== undefined;
        error = new TetherError(info.code === 'OK' || expired ? 'UNAVAILABLE' : info.code, `link lost: ${info.reason}`);
      } catch (err) {
        error = asTetherError(err, 'UNAVAILABLE');
      }
      if (this.closing) break;
      error = round.failed(error);
      const giveUpNow =
        this.firstResult && this.opts.failFast && round.allFailed && !(dialed && flakyRetries++ < FLAKY_FIRST_CONNECT_RETRIES);
      if (!error.retryable || giveUpNow) {
        this.firstResult?.reject(error);
        this.firstResult = undefined;
        this.status({ state: 'closed', error });
        this.closing = true;
        return;
      }
      const delay = backoffDelay(round.backoffAttempt(attempt++), this.opts.backoff ?? CLIENT_BACKOFF);
      this.log.warn({ err: error.message, retryInMs: delay, url, nextUrl: round.url }, 'gateway link down; retrying');
      this.status({ state: 'down', error, retryInMs: delay, url, nextUrl: round.url });
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        this.wakeSleep = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
    this.firstResult?.reject(new TetherError('CANCELLED', 'link closed before it connected'));
    this.status({ state: 'closed' });
  }
}

/**
 * Which gateway the next attempt dials, and what every gateway of the list said since the
 * link was last up. One URL: the link's errors as they were. Several: each error names its
 * gateway, and once all have failed in a row the error lists each one's reason.
 */
class FailedRound {
  private index = 0;
  private readonly reasons = new Map<string, string>();

  constructor(private readonly urls: readonly string[]) {}

  /** The URL the next attempt dials. */
  get url(): string {
    return this.urls[this.index];
  }

  /** True once every URL failed since the link was last up. */
  get allFailed(): boolean {
    return this.reasons.size === this.urls.length;
  }

  /** The link is up: the next failure starts a new round on the next URL. */
  connected(): void {
    this.reasons.clear();
  }

  /** Records the current URL's failure, moves on to the next URL, returns the error to report. */
  failed(error: TetherError): TetherError {
    const url = this.url;
    this.index = (this.index + 1) % this.urls.length;
    this.reasons.set(url, error.message);
    if (this.urls.length === 1) return error;
    if (!this.allFailed) return new TetherError(error.code, `${url}: ${error.message}`);
    const each = [...this.reasons].map(([u, m]) => `${u}: ${m}`).join('; ');
    return new TetherError(error.code, `all ${this.urls.length} gateways failed: ${each}`);
  }

  /** The backoff exponent: it grows once per round of the list, not once per URL tried. */
  backoffAttempt(attempt: number): number {
    return Math.floor(attempt / this.urls.length);
  }
}
