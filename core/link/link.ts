import { asTetherError, TetherError } from '../errors.js';
import { silentLogger, type Logger } from '../logging.js';
import type { ParamsOf, ResultOf } from '../protocol/methods.js';
import { assertCompatible } from '../protocol/version.js';
import { RpcPeer } from '../rpc/peer.js';
import { backoffDelay, CLIENT_BACKOFF, type BackoffPolicy } from '../util/backoff.js';
import type { DialOptions, Dialers } from './dial.js';
import { HEARTBEAT_DEFAULTS, startHeartbeat, type HeartbeatOptions } from './heartbeat.js';
import { startTokenRenewal, type TokenSource } from './token-renewal.js';

/** With failFast: first connections made and then lost before their hello, tried again. */
export const FLAKY_FIRST_CONNECT_RETRIES = 3;

/** The link's state, as a tagged union. */
export type LinkStatus =
  | { state: 'connecting'; attempt: number }
  | { state: 'connected'; peer: RpcPeer; hello: ResultOf<'hello'> }
  | { state: 'down'; error: TetherError; retryInMs: number }
  | { state: 'closed'; error?: TetherError };

export interface LinkOptions {
  url: string;
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
   * Give up on the first attempt instead of retrying (for one-shot commands). Default false.
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
 * (bad token, incompatible version) end the link instead of looping.
 */
export class Link {
  private current: RpcPeer | undefined;
  private closing = false;
  private wakeSleep: (() => void) | undefined;
  private loopDone: Promise<void> | undefined;
  private readonly log: Logger;
  private firstResult: { resolve: () => void; reject: (e: TetherError) => void } | undefined;

  constructor(private readonly opts: LinkOptions) {
    this.log = opts.logger ?? silentLogger;
  }

  /** The live peer, if connected. */
  get peer(): RpcPeer | undefined {
    return this.current;
  }

  /** Starts the loop; resolves after the first successful hello, rejects if that cannot happen. */
  start(): Promise<void> {
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
    while (!this.closing) {
      this.status({ state: 'connecting', attempt });
      let error: TetherError;
      let dialed = false;
      try {
        const token = this.opts.tokenSource ? await this.opts.tokenSource() : this.opts.dial?.token;
        const channel = await this.opts.dialers.dial(this.opts.url, { ...this.opts.dial, token });
        dialed = true;
        const peer = new RpcPeer(channel, { logger: this.log, requestTimeoutMs: this.opts.requestTimeoutMs });
        // The gateway's heartbeat pings us too; without an answer it would cut the link.
        peer.onRequest('ping', () => ({}));
        this.opts.setup?.(peer);
        const running = peer.run();
        const hello = await peer.request('hello', this.opts.hello(), { timeoutMs: 10_000 }).catch((err) => {
          channel.close('OK', 'hello failed');
          throw err;
        });
        assertCompatible(hello.protocol_version);
        this.current = peer;
        attempt = 0;
        startHeartbeat(peer, this.opts.heartbeat ?? HEARTBEAT_DEFAULTS, (reason) => {
          this.log.warn({ reason }, 'gateway stopped answering; reconnecting');
          channel.close('UNAVAILABLE', reason);
        });
        if (this.opts.tokenSource && token && hello.token_expires_at) {
          startTokenRenewal(peer, this.opts.tokenSource, { token, expiresAt: hello.token_expires_at, logger: this.log });
        }
        await this.opts.onConnected?.(peer, hello);
        this.status({ state: 'connected', peer, hello });
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
        error = new TetherError(info.code === 'OK' ? 'UNAVAILABLE' : info.code, `link lost: ${info.reason}`);
      } catch (err) {
        error = asTetherError(err, 'UNAVAILABLE');
      }
      if (this.closing) break;
      const giveUpNow = this.firstResult && this.opts.failFast && !(dialed && flakyRetries++ < FLAKY_FIRST_CONNECT_RETRIES);
      if (!error.retryable || giveUpNow) {
        this.firstResult?.reject(error);
        this.firstResult = undefined;
        this.status({ state: 'closed', error });
        this.closing = true;
        return;
      }
      const delay = backoffDelay(attempt++, this.opts.backoff ?? CLIENT_BACKOFF);
      this.log.warn({ err: error.message, retryInMs: delay }, 'gateway link down; retrying');
      this.status({ state: 'down', error, retryInMs: delay });
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
