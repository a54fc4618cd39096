import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { AgentConnector } from '@agentclientprotocol/sdk';
import { AcpServer } from '@agentclientprotocol/sdk/experimental/server';
import { CHANNEL_DEFAULTS, type Channel } from '../../core/channel/channel.js';
import type { ErrorCode } from '../../core/errors.js';
import { closeAcpSocket, gateAcpSocket } from './acp-gate.js';
import { refuse } from './listen-ws.js';

/** Where editors and scripts open an ACP WebSocket (experimental, like the ACP transport proposal). */
export const ACP_PATH = '/acp';

/** What the ACP agent of one admitted `/acp` connection gets from the gateway. */
export interface AcpLink {
  /** The upgrade's path and query (e.g. `/acp?agent=NAME`). */
  path: string;
  /** A new in-memory channel into routing, as the connection's principal. */
  open: () => Channel;
}

export interface AcpListenerOptions<A> {
  maxFrameBytes?: number;
  /** Decides each upgrade before the handshake, as for every other client (tokens or tickets). */
  admit: (req: IncomingMessage) => Promise<A>;
  /** The ACP agent for one admitted connection (it acts as what admit resolved with). */
  agentFor: (admitted: A, req: IncomingMessage) => AgentConnector;
  /** Told of each accepted connection, to close it when its token expires or is revoked (as every other connection). */
  onConnection?: (admitted: A, connection: AcpConnection) => void;
}

/** One accepted `/acp` connection, as the gateway closes it. */
export interface AcpConnection {
  readonly remote: string;
  /** Settles once the WebSocket has closed. */
  readonly closed: Promise<void>;
  /** Tells the editor why (a `_tether/connection_closing` notification), then closes with the code's close code. */
  close(code?: ErrorCode | 'OK', reason?: string): void;
}

/**
 * Serves the Agent Client Protocol over WebSocket at ACP_PATH of an existing HTTP server,
 * with the official SDK's experimental server transport (one JSON-RPC message per text
 * frame, `Acp-Connection-Id` on the 101 answer), behind a JSON-RPC 2.0 gate (acp-gate.ts).
 * Each admitted connection gets its own agent. Returns a function that closes every ACP connection.
 */
export function attachAcpListener<A>(server: Server, opts: AcpListenerOptions<A>): () => Promise<void> {
  const maxFrameBytes = opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes;
  const wss = new WebSocketServer({ noServer: true, maxPayload: maxFrameBytes, perMessageDeflate: false });
  // Connections get their agent per upgrade; the server-wide default is never used.
  const acp = new AcpServer({
    createAgent: () => ({
      connect: () => {
        throw new Error('no agent for this connection');
      },
    }),
  });
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if ((req.url ?? '/').split('?')[0] !== ACP_PATH) return;
    const ignore = () => {};
    socket.on('error', ignore);
    opts.admit(req).then(
      (admitted) => {
        socket.off('error', ignore);
        if (socket.destroyed) return;
        const upgrade = acp.prepareWebSocketUpgrade({ agent: opts.agentFor(admitted, req) });
        const onHeaders = (headers: string[], r: IncomingMessage) => {
          if (r === req) headers.push(`Acp-Connection-Id: ${upgrade.connectionId}`);
        };
        wss.on('headers', onHeaders);
        socket.once('close', () => {
          wss.off('headers', onHeaders);
          upgrade.reject(); // no-op once accepted
        });
        wss.handleUpgrade(req, socket, head, (ws) => {
          wss.off('headers', onHeaders);
          upgrade.accept(gateAcpSocket(ws, maxFrameBytes));
          opts.onConnection?.(admitted, {
            remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`,
            closed: new Promise((resolve) => (ws.readyState === ws.CLOSED ? resolve() : ws.once('close', () => resolve()))),
            close: (code = 'OK', reason = 'closed by the gateway') =>
              code === 'OK' ? ws.close(1000, reason) : closeAcpSocket(ws, code, reason),
          });
        });
      },
      (err) => {
        if (!socket.destroyed) refuse(socket, err);
      },
    );
  };
  server.on('upgrade', onUpgrade);
  return async () => {
    server.off('upgrade', onUpgrade);
    await acp.close();
    for (const ws of wss.clients) ws.terminate();
    wss.close();
  };
}
