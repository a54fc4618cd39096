import { WebSocket } from 'ws';
import { WS_PING_DEFAULTS, WsChannel, type WsSocket } from '../channel/ws.js';
import type { Channel } from '../channel/channel.js';
import { CHANNEL_DEFAULTS } from '../channel/channel.js';
import { codeFromHttpRefusal, TetherError } from '../errors.js';
import { WS_PATH } from '../protocol/http-paths.js';
import { DIAL_DEFAULTS, type DialOptions } from './dial-options.js';

/**
 * Whether frames to `url` need RFC 6455 masking. Masking keeps a proxy that misreads
 * WebSocket traffic from acting on bytes we relay (an engine line may carry text from a web
 * page, chosen by whoever wrote that page). Over TLS and on the loopback interface there is no
 * such proxy in between: only there is the key zero. That deviates from RFC 6455 §5.3, which
 * says a client MUST pick each frame's key fresh from a strong source of randomness; a zero key
 * is still a valid frame for every server (the mask bit is set, XOR with zero is the identity),
 * and it spares a copy of every frame (ws masks a Buffer into a new one) and lets a large one be
 * written unjoined. Anywhere else (plain ws:// to another host) the key is random as usual,
 * because an intermediary there could be fed attacker-chosen bytes.
 */
export function needsMasking(url: URL): boolean {
  if (url.protocol === 'wss:') return false;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return !(host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host));
}

/** A zero masking key (see {@link needsMasking}). */
const zeroMask = (mask: Buffer): void => {
  mask.fill(0);
};

/** Opens a WebSocket channel to a ws:// or wss:// gateway URL. */
export function dialWs(url: URL, opts: DialOptions): Promise<Channel> {
  const target = new URL(url.toString());
  if (target.pathname === '/' || target.pathname === '') target.pathname = WS_PATH;
  const maxFrameBytes = opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(target, {
      maxPayload: maxFrameBytes,
      perMessageDeflate: false,
      handshakeTimeout: opts.connectTimeoutMs ?? DIAL_DEFAULTS.connectTimeoutMs,
      headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
      ca: opts.ca,
      cert: opts.tlsCert,
      key: opts.tlsKey,
      ...(needsMasking(target) ? {} : { generateMask: zeroMask }),
    });
    const fail = (err: Error) => {
      ws.removeAllListeners();
      ws.on('error', () => {});
      ws.terminate();
      reject(new TetherError('UNAVAILABLE', `cannot connect to ${url.origin}: ${err.message}`));
    };
    ws.once('error', fail);
    ws.once('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0;
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString().slice(0, 512)));
      res.on('end', () => {
        ws.removeAllListeners();
        ws.on('error', () => {});
        ws.terminate();
        reject(
          new TetherError(
            codeFromHttpRefusal(status),
            `gateway refused the connection (HTTP ${status}): ${body.trim() || res.statusMessage}`,
          ),
        );
      });
    });
    let socket: WsSocket | undefined;
    ws.once('upgrade', (res) => (socket = res.socket));
    ws.once('open', () => {
      ws.off('error', fail);
      resolve(
        new WsChannel(ws, url.host, {
          socket,
          masking: needsMasking(target) ? undefined : 'zero-key',
          maxFrameBytes,
          pingIntervalMs: opts.ws?.pingIntervalMs ?? WS_PING_DEFAULTS.pingIntervalMs,
          pingTimeoutMs: opts.ws?.pingTimeoutMs ?? WS_PING_DEFAULTS.pingTimeoutMs,
        }),
      );
    });
  });
}
