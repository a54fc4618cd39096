import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { WsChannel } from '../core/channel/ws.js';
import type { Channel } from '../core/channel/channel.js';
import { CHANNEL_DEFAULTS } from '../core/channel/channel.js';

/** Where agents and clients open their WebSocket. */
export const WS_PATH = '/v1/connect';

export interface WsListenerOptions {
  maxFrameBytes?: number;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /** Called with every new, open channel. The callee owns it from then on. */
  onChannel: (channel: Channel, req: IncomingMessage) => void;
}

/**
 * Accepts WebSocket upgrades on WS_PATH of an existing HTTP server and hands out channels.
 * permessage-deflate is off (CPU, and inflation bombs); maxPayload is set explicitly.
 * Returns a function that closes every socket it accepted.
 */
export function attachWsListener(server: Server, opts: WsListenerOptions): () => void {
  const maxFrameBytes = opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes;
  const wss = new WebSocketServer({ noServer: true, maxPayload: maxFrameBytes, perMessageDeflate: false, clientTracking: true });
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== WS_PATH) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const remote = `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`;
      const channel = new WsChannel(ws, remote, {
        maxFrameBytes,
        pingIntervalMs: opts.pingIntervalMs ?? 15_000,
        pingTimeoutMs: opts.pingTimeoutMs ?? 10_000,
      });
      opts.onChannel(channel, req);
    });
  };
  server.on('upgrade', onUpgrade);
  return () => {
    server.off('upgrade', onUpgrade);
    for (const ws of wss.clients) ws.terminate();
    wss.close();
  };
}
