import type { Socket } from 'node:net';
import { authError } from '../../core/auth/auth-error.js';
import { httpStatusOf, TetherError } from '../../core/errors.js';
import { endWithHttp } from './http-answer.js';
import { BoundedMap } from '../../core/util/bounded-map.js';

/**
 * What the door lets in before anyone is authenticated (threats A17, B5, H1). Each number is
 * a `limits` key of the gateway's configuration (gateway/config.ts) and is listed in
 * docs/deploy.md.
 */
export interface DoorLimits {
  /** Open TCP connections on the whole gateway, both listeners, authenticated or not (H1). */
  maxConnections: number;
  /**
   * Open TCP connections from one remote address. Everyone behind one reverse proxy or NAT
   * shares an address: raise it there. The reconnect storm test (200 clients and 20 agents
   * from one address at once) fits under the default.
   */
  maxConnectionsPerAddress: number;
  /** Refused credentials one address may present per minute once its burst is spent (A17). */
  authFailuresPerMinute: number;
  /** Refused credentials one address may present back to back before the rate applies. */
  authFailureBurst: number;
  /** An HTTP request (a WebSocket upgrade included) must send its headers within this (B5, slowloris). */
  headersTimeoutMs: number;
  /** An HTTP request must be complete within this. */
  requestTimeoutMs: number;
}

/** Defaults (threats.md: 20/min, burst 40 as in Teleport; 10k connections → 503). */
export const DOOR_DEFAULTS: DoorLimits = {
  maxConnections: 10_000,
  maxConnectionsPerAddress: 512,
  authFailuresPerMinute: 20,
  authFailureBurst: 40,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
};

/**
 * The listen backlog of both ports (Node's default is 511): connections the kernel has
 * completed but the gateway not yet accepted. A burst past it (a flood, a reconnect storm)
 * has its handshakes dropped by the kernel, and a client that then sends nothing never
 * learns. The kernel caps it at net.core.somaxconn (4096 on current Linux).
 */
export const LISTEN_BACKLOG = 4096;

/** How often Node checks open HTTP connections against the header and request deadlines. */
export const DEADLINE_CHECK_INTERVAL_MS = 1_000;

/** Addresses remembered by the failure limiter; past it, the longest-idle ones are forgotten. */
const MAX_TRACKED_ADDRESSES = 50_000;

/** The address part of "ip:port", "[v6]:port" or a grpc-js peer string ("ipv4:…", "ipv6:[…]:port"). */
export function addressOf(remote: string): string {
  const s = remote.replace(/^ipv[46]:/, '');
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(s);
  if (v6) return v6[1].replace(/^::ffff:/, '');
  const v4 = /^([^:]+):\d+$/.exec(s);
  return (v4 ? v4[1] : s).replace(/^::ffff:/, '');
}

/**
 * Counts open connections per gateway and per remote address. Both listeners share one
 * instance, so the caps are the gateway's, not each port's.
 */
export class ConnectionLimiter {
  private total = 0;
  private readonly byAddress = new Map<string, number>();

  constructor(private readonly limits: Pick<DoorLimits, 'maxConnections' | 'maxConnectionsPerAddress'>) {}

  /** Open connections now (all addresses). */
  get open(): number {
    return this.total;
  }

  /**
   * Counts a new connection from `address` and returns the function that releases it
   * (idempotent), or throws RESOURCE_EXHAUSTED when a cap is reached (nothing is counted then).
   */
  acquire(address: string): () => void {
    const mine = this.byAddress.get(address) ?? 0;
    if (this.total >= this.limits.maxConnections) {
      throw new TetherError('RESOURCE_EXHAUSTED', `gateway connection limit reached (${this.limits.maxConnections}); retry later`);
    }
    if (mine >= this.limits.maxConnectionsPerAddress) {
      throw new TetherError(
        'RESOURCE_EXHAUSTED',
        `too many connections from this address (limit ${this.limits.maxConnectionsPerAddress}); retry later`,
      );
    }
    this.total++;
    this.byAddress.set(address, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.byAddress.get(address) ?? 1) - 1;
      if (left <= 0) this.byAddress.delete(address);
      else this.byAddress.set(address, left);
    };
  }
}

/** One attempt's reservation (see {@link AuthFailureLimiter.take}). */
export interface Reservation {
  /** Gives the failure back: the credential was good. Idempotent. */
  refund: () => void;
  /** Whether this attempt took the address's last one (a failure now starts refusals). */
  exhausted: boolean;
}

/**
 * Refused credentials per remote address, as a token bucket (threat A17): each refusal takes
 * one token, tokens come back at `authFailuresPerMinute`, at most `authFailureBurst` are held.
 * An address whose bucket is empty is refused at once, before its credential is looked at.
 * Each attempt reserves a token up front and a good credential gives it back, so successful
 * authentications cost nothing (a reconnect storm of valid tokens never trips it) and
 * concurrent bad ones cannot exceed the burst.
 */
export class AuthFailureLimiter {
  private readonly buckets = new BoundedMap<string, { tokens: number; atMs: number }>(MAX_TRACKED_ADDRESSES);

  constructor(
    private readonly limits: Pick<DoorLimits, 'authFailuresPerMinute' | 'authFailureBurst'>,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Reserves one failure of `address` before its credential is checked, so concurrent
   * attempts cannot overrun the burst. Throws RESOURCE_EXHAUSTED (reason `rate_limited`)
   * when none is left. Returns the refund to call when the credential turns out good; a
   * failure just keeps the reservation. `exhausted` says whether this took the last one.
   */
  take(address: string): Reservation {
    const b = this.refill(address) ?? { tokens: this.limits.authFailureBurst, atMs: this.now() };
    if (b.tokens < 1) {
      const waitSec = Math.ceil(((1 - b.tokens) * 60) / this.limits.authFailuresPerMinute);
      throw authError('RESOURCE_EXHAUSTED', 'rate_limited', `too many failed authentications from this address; retry in ${waitSec} s`);
    }
    b.tokens -= 1;
    this.buckets.delete(address); // re-inserted last: the map's order is least recently used first
    this.buckets.set(address, b);
    let refunded = false;
    return {
      exhausted: b.tokens < 1,
      refund: () => {
        if (refunded) return;
        refunded = true;
        const now = this.buckets.get(address);
        if (now) now.tokens = Math.min(this.limits.authFailureBurst, now.tokens + 1);
      },
    };
  }

  private refill(address: string): { tokens: number; atMs: number } | undefined {
    const b = this.buckets.get(address);
    if (!b) return undefined;
    const now = this.now();
    b.tokens = Math.min(this.limits.authFailureBurst, b.tokens + ((now - b.atMs) * this.limits.authFailuresPerMinute) / 60_000);
    b.atMs = now;
    if (b.tokens >= this.limits.authFailureBurst) {
      this.buckets.delete(address); // full again: nothing to remember
      return undefined;
    }
    return b;
  }
}

/**
 * Counts a freshly accepted TCP connection against `limiter` until it closes. Over a cap the
 * connection is ended at once, before a byte of it is parsed: with `answerHttp` (a plaintext
 * HTTP listener) it gets a bare `503 Service Unavailable` with `Retry-After`, otherwise
 * (TLS, gRPC) it is just closed. Returns whether the connection may proceed.
 */
export function gateConnection(
  limiter: ConnectionLimiter,
  socket: Socket,
  answerHttp: boolean,
  onRefused?: (err: TetherError) => void,
): boolean {
  let release: () => void;
  try {
    release = limiter.acquire(addressOf(socket.remoteAddress ?? '?'));
  } catch (err) {
    const e = err as TetherError;
    onRefused?.(e);
    socket.on('error', () => {});
    if (answerHttp) {
      endWithHttp(socket, httpStatusOf('UNAVAILABLE'), e.message, { 'Retry-After': '1' });
      socket.setTimeout(1_000, () => socket.destroy());
    } else {
      socket.destroy();
    }
    return false;
  }
  socket.once('close', release);
  return true;
}
