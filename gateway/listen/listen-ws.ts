import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { WS_PING_DEFAULTS, WsChannel } from '../../core/channel/ws.js';
import { EndOfTurn } from '../../core/channel/end-of-turn.js';
import { WS_PATH } from '../../core/protocol/http-paths.js';
import type { Channel } from '../../core/channel/channel.js';
import { CHANNEL_DEFAULTS } from '../../core/channel/channel.js';
import { asTetherError, httpStatusOf } from '../../core/errors.js';
import { endWithHttp } from '../door/http-answer.js';
import { JSONRPC_SUBPROTOCOL } from '../../core/protocol/jsonrpc-dialect.js';

/** Where this listener serves upgrades (one definition for it and the dialers: core/protocol/http-paths.ts). */
export { WS_PATH };
/** Upgrades are also served at the bare URL `tether up` prints (`ws://HOST:PORT`, path `/`). */
const WS_PATHS = new Set([WS_PATH, '/']);

export interface WsListenerOptions<A = undefined> {
  maxFrameBytes?: number;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /**
   * Decides each upgrade request before the WebSocket handshake (authentication at the door).
   * Resolve with what onChannel should get; reject (a TetherError) to refuse: the socket gets
   * a plain HTTP answer (401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 429, 400, 503 — see
   * core/errors.ts) whose text body is the error message, and no WebSocket exists. Absent:
   * every upgrade is accepted.
   */
  admit?: (req: IncomingMessage) => Promise<A>;
  /** Called with every new, open channel and what admit resolved with. The callee owns the channel from then on. */
  onChannel: (channel: Channel, req: IncomingMessage, admitted: A) => void;
  /** Paths whose upgrades another listener of the same server answers (e.g. `/acp`). */
  otherPaths?: readonly string[];
}

/**
 * Accepts WebSocket upgrades on WS_PATH (and `/`) of an existing HTTP server and hands out channels.
 * permessage-deflate is off (CPU, and inflation bombs); maxPayload is set explicitly.
 * Returns a function that closes every socket it accepted.
 */
export function attachWsListener<A = undefined>(server: Server, opts: WsListenerOptions<A>): () => void {
  const maxFrameBytes = opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes;
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: maxFrameBytes,
    perMessageDeflate: false,
    clientTracking: true,
    // The JSON-RPC dialect is chosen by subprotocol; it is answered so the client knows it was understood.
    handleProtocols: (offered) => (offered.has(JSONRPC_SUBPROTOCOL) ? JSONRPC_SUBPROTOCOL : false),
  });
  const endOfTurn = new EndOfTurn(); // shared by this listener's channels: one tick uncorks them all
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, admitted: A) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const remote = `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`;
      const channel = new WsChannel(ws, remote, {
        socket: socket as Duplex & { bytesRead: number },
        masking: 'none',
        endOfTurn,
        maxFrameBytes,
        pingIntervalMs: opts.pingIntervalMs ?? WS_PING_DEFAULTS.pingIntervalMs,
        pingTimeoutMs: opts.pingTimeoutMs ?? WS_PING_DEFAULTS.pingTimeoutMs,
      });
      opts.onChannel(channel, req, admitted);
    });
  };
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = (req.url ?? '/').split('?')[0];
    if (opts.otherPaths?.includes(path)) return;
    if (!WS_PATHS.has(path)) {
      endWithHttp(socket, httpStatusOf('NOT_FOUND'));
      return;
    }
    const admit = opts.admit;
    if (!admit) {
      upgrade(req, socket, head, undefined as A);
      return;
    }
    // The peer may vanish while we decide; its socket errors must not go unhandled meanwhile.
    const ignore = () => {};
    socket.on('error', ignore);
    Promise.resolve()
      .then(() => admit(req))
      .then(
        (admitted) => {
          socket.off('error', ignore);
          if (socket.destroyed) return;
          upgrade(req, socket, head, admitted);
        },
        (err) => {
          if (!socket.destroyed) refuse(socket, err);
        },
      );
  };
  server.on('upgrade', onUpgrade);
  return () => {
    server.off('upgrade', onUpgrade);
    for (const ws of wss.clients) ws.terminate();
    wss.close();
  };
}

/** Answers a refused upgrade with a plain HTTP response (text body: the error message) and closes. */
export function refuse(socket: Duplex, err: unknown): void {
  const e = asTetherError(err);
  const challenge: Record<string, string> = e.code === 'UNAUTHENTICATED' ? { 'WWW-Authenticate': 'Bearer realm="tether"' } : {};
  endWithHttp(socket, httpStatusOf(e.code), e.message.replace(/[\r\n]+/g, ' ').slice(0, 500), {
    'Cache-Control': 'no-store',
    ...challenge,
  });
}
