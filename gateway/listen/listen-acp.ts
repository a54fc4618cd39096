import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { AgentConnector } from '@agentclientprotocol/sdk';
import type { AcpServer } from '@agentclientprotocol/sdk/experimental/server';
import { CHANNEL_DEFAULTS, type Channel } from '../../core/channel/channel.js';
import type { ErrorCode } from '../../core/errors.js';
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
  agentFor: (admitted: A, req: IncomingMessage) => AgentConnector | Promise<AgentConnector>;
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

/** The SDK's server transport and our gate, loaded together. */
interface AcpParts {
  acp: AcpServer;
  gate: typeof import('./acp-gate.js');
}

/**
 * The ACP side of the gateway, loaded at the first `/acp` connection: the SDK and its schemas
 * are ≈2.7 MB of the gateway's heap, which every full garbage collection marks again (at 100 KB
 * frames over gRPC, most of the gateway's time), whether or not anyone uses ACP.
 */
function loadAcp(): Promise<AcpParts> {
  return Promise.all([import('@agentclientprotocol/sdk/experimental/server'), import('./acp-gate.js')]).then(([sdk, gate]) => ({
    // Connections get their agent per upgrade; the server-wide default is never used.
    acp: new sdk.AcpServer({
      createAgent: () => ({
        connect: () => {
          throw new Error('no agent for this connection');
        },
      }),
    }),
    gate,
  }));
}

/**
 * Serves the Agent Client Protocol over WebSocket at ACP_PATH of an existing HTTP server,
 * with the official SDK's experimental server transport (one JSON-RPC message per text
 * frame, `Acp-Connection-Id` on the 101 answer), behind a JSON-RPC 2.0 gate (acp-gate.ts).
 * Each admitted connection gets its own agent. The SDK is loaded at the first connection.
 * Returns a function that closes every ACP connection.
 */
export function attachAcpListener<A>(server: Server, opts: AcpListenerOptions<A>): () => Promise<void> {
  const maxFrameBytes = opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes;
  const wss = new WebSocketServer({ noServer: true, maxPayload: maxFrameBytes, perMessageDeflate: false });
  let parts: Promise<AcpParts> | undefined;
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if ((req.url ?? '/').split('?')[0] !== ACP_PATH) return;
    const ignore = () => {};
    socket.on('error', ignore);
    opts
      .admit(req)
      .then(async (admitted) => {
        parts ??= loadAcp();
        const { acp, gate } = await parts;
        // No agent for a socket that went away while the SDK loaded.
        return { admitted, acp, gate, agent: socket.destroyed ? undefined : await opts.agentFor(admitted, req) };
      })
      .then(
        ({ admitted, acp, gate, agent }) => {
          socket.off('error', ignore);
          if (!agent) return;
          const upgrade = acp.prepareWebSocketUpgrade({ agent });
          // Gone while its agent was made: the SDK lets the agent go, as for a socket closing before its upgrade.
          if (socket.destroyed) return upgrade.reject();
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
            upgrade.accept(gate.gateAcpSocket(ws, maxFrameBytes));
            opts.onConnection?.(admitted, {
              remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`,
              closed: new Promise((resolve) => (ws.readyState === ws.CLOSED ? resolve() : ws.once('close', () => resolve()))),
              close: (code = 'OK', reason = 'closed by the gateway') =>
                code === 'OK' ? ws.close(1000, reason) : gate.closeAcpSocket(ws, code, reason),
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
    if (parts) await (await parts.catch(() => undefined))?.acp.close();
    for (const ws of wss.clients) ws.terminate();
    wss.close();
  };
}
