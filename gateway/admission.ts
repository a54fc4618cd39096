import type { Socket } from 'node:net';
import type { Channel } from '../core/channel/channel.js';
import { TetherError } from '../core/errors.js';
import type { Logger } from '../core/logging.js';
import type { Dialect } from '../core/protocol/jsonrpc-dialect.js';
import { Door, type Admission, type DoorOptions } from './door/door.js';
import { AuthFailureLimiter, ConnectionLimiter, gateConnection, type DoorLimits } from './door/door-limits.js';
import type { Gateway } from './gateway.js';
import { LiveTokens, type Watched } from './door/live-tokens.js';
import type { RevocationList } from './door/revocations.js';

/** Options of {@link openAdmissions}. */
export interface AdmissionOptions {
  /** How connections authenticate; absent: authentication is off (logged as a warning). */
  auth?: Pick<DoorOptions, 'verifier' | 'allowOrigins' | 'tickets' | 'login' | 'browser' | 'web'>;
  limits: DoorLimits;
  revocations?: RevocationList;
  logger: Logger;
}

/** What every listener of one gateway server shares between the socket and routing. */
export interface Admissions {
  /** Authentication at the door: origins, tickets, tokens, revocations, the failure limit. */
  door: Door;
  /** The connection caps as a listener's `connection` handler: false for a socket past a cap, which is ended (HTTP 503 when `plaintextHttp`) and counted. */
  gate(transport: string, plaintextHttp: boolean): (socket: Socket) => boolean;
  /** Hands an admitted channel to routing, its token tracked (expiry, revocation, renewal through the door). */
  accept(channel: Channel, admitted: Admission, transport: string, dialect?: Dialect): void;
  /**
   * Watches a connection that is not a channel into routing (an `/acp` WebSocket) for its
   * token's expiry and revocation, closed like every other connection; no-op without a token.
   */
  watch(connection: Watched, admitted: Admission): void;
  /** Stops tracking tokens (the server is closing). */
  dispose(): void;
}

/**
 * The door of one gateway server and the hand-over from it to routing: refusals are counted
 * in the gateway's metrics, the connection caps and the failed-authentication limit come
 * from `limits`, and every admitted token is watched for expiry and revocation.
 */
export function openAdmissions(gateway: Gateway, opts: AdmissionOptions): Admissions {
  const log = opts.logger;
  const connections = new ConnectionLimiter(opts.limits);
  const door = new Door({
    ...(opts.auth ?? { verifier: 'off' }),
    logger: log.child({ component: 'door' }),
    onAuthFailure: (reason) => gateway.metrics.authFailure(reason),
    failures: new AuthFailureLimiter(opts.limits),
    revocations: opts.revocations,
  });
  if (!door.authEnabled) log.warn('authentication is OFF: anyone who can reach this gateway can run sessions on its agents');
  const liveTokens = new LiveTokens({
    skewMs: door.clockToleranceMs,
    now: () => door.nowMs(),
    revocations: opts.revocations,
    logger: log.child({ component: 'tokens' }),
  });
  // A browser sign-in that ends (sign-out in any tab, revocation, lifetime) ends every tab's connection.
  const stopEnding = door.browser?.onEnd((jti, why) => liveTokens.closeJti(jti, why));
  return {
    door,
    gate: (transport, plaintextHttp) => (socket) =>
      gateConnection(connections, socket, plaintextHttp, (err) => {
        gateway.metrics.connectionRefused(transport);
        log.debug({ transport, remote: socket.remoteAddress, err: err.message }, 'connection refused at the cap');
      }),
    accept(channel, admitted, transport, dialect = 'native') {
      const token = admitted.token;
      if (!token) return gateway.accept(channel, admitted.principal, undefined, dialect);
      liveTokens.track(channel, token);
      gateway.accept(
        channel,
        admitted.principal,
        {
          expiresAt: token.expiresAt,
          renew: async (fresh) => {
            const again = await door.admit({ transport, remote: channel.remote, authorization: `Bearer ${fresh}` });
            if (!again.token) throw new TetherError('FAILED_PRECONDITION', 'authentication is off on this gateway');
            liveTokens.renew(channel, again.token);
            return again.token.expiresAt;
          },
        },
        dialect,
      );
    },
    watch(connection, admitted) {
      if (admitted.token) liveTokens.track(connection, admitted.token);
    },
    dispose: () => {
      stopEnding?.();
      liveTokens.dispose();
    },
  };
}
