/**
 * JSON-RPC 2.0 over one browser WebSocket (docs/protocol.md): requests with ids and their
 * answers, notifications to a handler. It never reconnects by itself: connection.ts does.
 */

import { ERROR_TABLE, type ErrorCode } from '../../../core/errors.js';

/** An error answer of the gateway: `code` is the canonical code (core/errors.ts). */
export class RpcError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
  /** Whether trying again (on a new connection) can help: the error table's word. */
  get retryable(): boolean {
    return ERROR_TABLE[this.code as ErrorCode]?.retryable ?? false;
  }
}

/** Longest wait for one answer. */
const REQUEST_TIMEOUT_MS = 60_000;

export class RpcSocket {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: any) => void; reject: (e: RpcError) => void; timer: number }>();
  /** Settles once, when the socket closed (for any reason). */
  readonly closed: Promise<string>;
  /** When the last message arrived (the gateway's pings count): silence is how a stalled link shows. */
  lastHeardAt = Date.now();

  private constructor(private readonly ws: WebSocket, onNotification: (method: string, params: any) => void) {
    this.closed = new Promise((resolve) => {
      ws.addEventListener('close', (e) => {
        for (const w of this.waiting.values()) {
          clearTimeout(w.timer);
          w.reject(new RpcError('UNAVAILABLE', 'the connection to the gateway closed'));
        }
        this.waiting.clear();
        resolve(e.reason || `closed (${e.code})`);
      });
    });
    ws.addEventListener('message', (e) => {
      this.lastHeardAt = Date.now();
      if (typeof e.data !== 'string') return; // binary frames carry nothing the page reads
      let m: any;
      try {
        m = JSON.parse(e.data);
      } catch {
        return;
      }
      if (m && typeof m.method === 'string') {
        if (m.id === undefined) onNotification(m.method, m.params);
        else this.answer(m.id, m.method); // the gateway's heartbeat pings
        return;
      }
      const w = typeof m?.id === 'number' ? this.waiting.get(m.id) : undefined;
      if (!w) return;
      this.waiting.delete(m.id);
      clearTimeout(w.timer);
      if (m.error) w.reject(new RpcError(String(m.error.data?.code ?? 'INTERNAL'), String(m.error.message ?? 'error')));
      else w.resolve(m.result);
    });
  }

  /** Opens a socket to `url` and resolves once it is open (rejects if it closes first, or after `timeoutMs`: a stalled link never opens). */
  static open(url: string, onNotification: (method: string, params: any) => void, timeoutMs: number): Promise<RpcSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      const sock = new RpcSocket(ws, onNotification);
      const timer = window.setTimeout(() => {
        ws.close();
        reject(new RpcError('UNAVAILABLE', 'the gateway did not answer'));
      }, timeoutMs);
      const fail = () => {
        clearTimeout(timer);
        reject(new RpcError('UNAVAILABLE', 'could not open the WebSocket to the gateway'));
      };
      ws.addEventListener('error', fail, { once: true });
      ws.addEventListener('open', () => {
        clearTimeout(timer);
        ws.removeEventListener('error', fail);
        resolve(sock);
      }, { once: true });
    });
  }

  request<T = any>(method: string, params: unknown = {}, timeoutMs = REQUEST_TIMEOUT_MS): Promise<T> {
    if (this.ws.readyState !== WebSocket.OPEN) return Promise.reject(new RpcError('UNAVAILABLE', 'not connected to the gateway'));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = window.setTimeout(() => {
        this.waiting.delete(id);
        reject(new RpcError('DEADLINE_EXCEEDED', `${method} got no answer within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      this.waiting.set(id, { resolve, reject, timer });
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  /** Answers a request of the gateway: `ping` with an empty result, anything else as unknown. */
  private answer(id: unknown, method: string): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    const body = method === 'ping' ? { result: {} } : { error: { code: -32601, message: `the web page does not serve ${method}` } };
    this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, ...body }));
  }

  close(): void {
    this.ws.close(1000, 'bye');
  }
}
