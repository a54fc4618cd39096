import { connect, type NatsConnection } from '@nats-io/transport-node';
import { TetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';
import type { NatsDial } from './nats-auth.js';

/** How long joining waits for the NATS server before the gateway refuses to start. */
export const CLUSTER_CONNECT_TIMEOUT_MS = 5_000;
/** Pause between reconnect attempts once joined (the client adds jitter); it never gives up. */
const RECONNECT_WAIT_MS = 250;

/** The link to NATS as the gateway reports it (/readyz, logs). */
export type ClusterLinkState = { kind: 'up' } | { kind: 'down'; sinceMs: number; reason: string } | { kind: 'closed' };

/**
 * The gateway's one connection to NATS. `open` fails fast (UNAVAILABLE) when the server is
 * not there at start; once joined, the client reconnects forever with a short pause, and
 * `state` says whether the link is up. `onChange` hears every change, in order.
 */
export class NatsLink {
  private current: ClusterLinkState = { kind: 'up' };
  private readonly listeners: ((s: ClusterLinkState) => void)[] = [];

  private constructor(
    readonly nc: NatsConnection,
    readonly url: string,
    private readonly log: Logger,
  ) {
    void this.watch();
  }

  /** Connects as `dial` says (server, authentication, TLS); UNAVAILABLE when refused or unreachable. */
  static async open(dial: NatsDial, name: string, log: Logger): Promise<NatsLink> {
    const url = dial.shown;
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: dial.server,
        authenticator: dial.authenticator,
        tls: dial.tls,
        name,
        timeout: CLUSTER_CONNECT_TIMEOUT_MS,
        maxReconnectAttempts: -1,
        reconnectTimeWait: RECONNECT_WAIT_MS,
        waitOnFirstConnect: false,
      });
    } catch (err) {
      throw new TetherError('UNAVAILABLE', `cannot reach the cluster's NATS server at ${url}: ${(err as Error).message}`);
    }
    return new NatsLink(nc, url, log);
  }

  get state(): ClusterLinkState {
    return this.current;
  }

  get isUp(): boolean {
    return this.current.kind === 'up';
  }

  /** `listener` hears every later change, in order; the returned function stops that. */
  onChange(listener: (s: ClusterLinkState) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const at = this.listeners.indexOf(listener);
      if (at >= 0) this.listeners.splice(at, 1);
    };
  }

  private set(s: ClusterLinkState): void {
    this.current = s;
    for (const l of [...this.listeners]) l(s);
  }

  private async watch(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === 'disconnect' && this.current.kind === 'up') {
        this.log.warn({ server: this.url }, 'cluster link down: serving local sessions, holding what must be published');
        this.set({ kind: 'down', sinceMs: Date.now(), reason: 'disconnected from NATS' });
      } else if (s.type === 'reconnect') {
        this.log.info({ server: this.url }, 'cluster link back up');
        this.set({ kind: 'up' });
      }
    }
  }

  /** Drains nothing: what is unpublished stays with the agents (never acknowledged). Idempotent. */
  async close(): Promise<void> {
    if (this.current.kind === 'closed') return;
    this.set({ kind: 'closed' });
    await this.nc.close().catch(() => {});
  }
}
