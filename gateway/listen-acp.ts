import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { AgentConnector } from '@agentclientprotocol/sdk';
import { AcpServer } from '@agentclientprotocol/sdk/experimental/server';
import { CHANNEL_DEFAULTS, type Channel } from '../core/channel/channel.js';
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
}

/**
 * Serves the Agent Client Protocol over WebSocket at ACP_PATH of an existing HTTP server,
 * with the official SDK's experimental server transport (one JSON-RPC message per text
 * frame, `Acp-Connection-Id` on the 101 answer). Each admitted connection gets its own
 * agent. Returns a function that closes every ACP connection.
 */
export function attachAcpListener<A>(server: Server, opts: AcpListenerOptions<A>): () => Promise<void> {
  const wss = new WebSocketServer({ noServer: true, maxPayload: opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes, perMessageDeflate: false });
  // Connections get their agent per upgrade; the server-wide default is never used.
  const acp = new AcpServer({ createAgent: () => ({ connect: () => { throw new Error('no agent for this connection'); } }) });
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
          upgrade.accept(ws);
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
