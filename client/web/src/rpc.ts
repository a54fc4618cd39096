/**
 * JSON-RPC 2.0 over one browser WebSocket (docs/protocol.md): the house's one engine
 * (core/rpc/engine.ts) over a WebSocket transport. Errors are TetherErrors (core/errors.ts).
 * It never reconnects by itself: connection.ts does.
 */

import { ERROR_TABLE, TetherError } from '../../../core/errors.js';
import { RpcEngine, type RpcTransport } from '../../../core/rpc/engine.js';

/** A notification's params, read per method by the page (the gateway's schemas checked them). */
type NotificationParams = any;

/** Longest wait for one answer. */
const REQUEST_TIMEOUT_MS = 60_000;

/**
 * What the page may leave unsent in its socket before it counts the gateway as not reading
 * (the engine's slow-consumer rule): a few of the largest prompts.
 */
const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;

/** The gateway's requests the page serves: `ping` (the gateway's heartbeat), whatever its params. */
const SERVED = { ping: { safeParse: (data: unknown) => ({ success: true as const, data }) } };

/** The engine's transport over a browser WebSocket: nothing is sent unless it is open. */
function socketTransport(ws: WebSocket): RpcTransport {
  const post = (text: string): boolean => {
    if (ws.readyState !== WebSocket.OPEN) return false;
    ws.send(text);
    return true;
  };
  return {
    get isClosed() {
      return ws.readyState !== WebSocket.OPEN;
    },
    get bufferedBytes() {
      return ws.bufferedAmount;
    },
    maxFrameBytes: Infinity, // the gateway bounds what it takes
    post,
    send: (text) => (post(text) ? Promise.resolve() : Promise.reject(new TetherError('UNAVAILABLE', 'not connected to the gateway'))),
    close: (code, reason) => ws.close(ERROR_TABLE[code].wsClose, reason),
  };
}

export class RpcSocket {
  private readonly rpc: RpcEngine<typeof SERVED>;
  /** Settles once, when the socket closed (for any reason). */
  readonly closed: Promise<string>;
  /** When the last message arrived (the gateway's pings count): silence is how a stalled link shows. */
  lastHeardAt = Date.now();

  private constructor(
    private readonly ws: WebSocket,
    onNotification: (method: string, params: NotificationParams) => void,
  ) {
    this.rpc = new RpcEngine(socketTransport(ws), {
      methods: SERVED,
      otherNotification: onNotification,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      maxBufferedBytes: MAX_BUFFERED_BYTES,
    }).handle('ping', () => ({}));
    this.closed = new Promise((resolve) => {
      ws.addEventListener('close', (e) => {
        const reason = e.reason || `closed (${e.code})`;
        this.rpc.end(reason);
        resolve(reason);
      });
    });
    ws.addEventListener('message', (e) => {
      this.lastHeardAt = Date.now();
      if (typeof e.data !== 'string') return; // binary frames carry nothing the page reads
      // A joined replay (replay.joined.v1): several messages, one a line (a message's JSON never holds a raw newline).
      let at = 0;
      for (let nl = e.data.indexOf('\n'); nl >= 0; at = nl + 1, nl = e.data.indexOf('\n', at)) this.rpc.receive(e.data.slice(at, nl));
      this.rpc.receive(at ? e.data.slice(at) : e.data);
    });
  }

  /** Opens a socket to `url` and resolves once it is open (rejects if it closes first, or after `timeoutMs`: a stalled link never opens). */
  static open(url: string, onNotification: (method: string, params: NotificationParams) => void, timeoutMs: number): Promise<RpcSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      const sock = new RpcSocket(ws, onNotification);
      const timer = window.setTimeout(() => {
        ws.close();
        reject(new TetherError('UNAVAILABLE', 'the gateway did not answer'));
      }, timeoutMs);
      const fail = () => {
        clearTimeout(timer);
        reject(new TetherError('UNAVAILABLE', 'could not open the WebSocket to the gateway'));
      };
      ws.addEventListener('error', fail, { once: true });
      ws.addEventListener(
        'open',
        () => {
          clearTimeout(timer);
          ws.removeEventListener('error', fail);
          resolve(sock);
        },
        { once: true },
      );
    });
  }

  /** One request; rejects with a TetherError (the gateway's, DEADLINE_EXCEEDED, or UNAVAILABLE when the socket is not open or closes first). */
  request<T = any>(method: string, params: unknown = {}, timeoutMs = REQUEST_TIMEOUT_MS): Promise<T> {
    return this.rpc.request(method, params, { timeoutMs }) as Promise<T>;
  }

  close(): void {
    this.ws.close(1000, 'bye');
  }
}
