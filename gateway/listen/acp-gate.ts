import { EventEmitter } from 'node:events';
import type { WebSocket } from 'ws';
import { AGENT_METHODS } from '@agentclientprotocol/sdk';
import type { ErrorCode } from '../../core/errors.js';
import { ERROR_TABLE } from '../../core/errors.js';
import { JSONRPC_CODES } from '../../core/protocol/jsonrpc-dialect.js';
import { replyTooLarge } from '../../core/rpc/engine.js';
import { readMessage } from '../../core/rpc/envelope.js';

/** The methods an editor may call on an ACP agent (stable ACP v1), by their wire names. */
const ACP_AGENT_METHODS: ReadonlySet<string> = new Set(Object.values(AGENT_METHODS));

/** The notification an editor is sent just before the gateway closes its `/acp` connection (an ACP extension: `_` names). */
export const ACP_CLOSING_NOTIFICATION = '_tether/connection_closing';

/** What the ACP SDK's server reads and writes: a subset of `ws`'s WebSocket. */
export interface GatedSocket {
  readonly readyState: number;
  readonly bufferedAmount: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  on(type: string, listener: (...args: unknown[]) => void): unknown;
  off(type: string, listener: (...args: unknown[]) => void): unknown;
}

/**
 * The `/acp` WebSocket as the ACP SDK's server sees it, behind a JSON-RPC 2.0 gate: a frame
 * that is not one JSON-RPC message (a batch, a wrong `jsonrpc`, an id that is not a string of
 * at most 128 characters or a safe integer) is answered -32600, and a request for a method ACP
 * does not define (`__proto__`, `toString`, …) -32601, here, before initialize as after; the
 * SDK would instead close the connection or never answer. Everything else passes untouched.
 * Outbound, an answer over `maxFrameBytes` (the editor's limit as much as ours) is replaced by
 * a RESOURCE_EXHAUSTED error to the same id, so the editor is never left waiting for it.
 */
export function gateAcpSocket(ws: WebSocket, maxFrameBytes: number): GatedSocket {
  const events = new EventEmitter();
  ws.on('message', (data, isBinary) => {
    if (isBinary) return void events.emit('message', data, true);
    const text = String(data);
    const refusal = refusalOf(text);
    if (refusal) ws.send(JSON.stringify(refusal));
    else events.emit('message', text, false);
  });
  ws.on('close', (...args) => events.emit('close', ...args));
  ws.on('error', (err) => events.emit('error', err));
  return {
    get readyState() {
      return ws.readyState;
    },
    get bufferedAmount() {
      return ws.bufferedAmount;
    },
    send: (data) => ws.send(answerWithin(data, maxFrameBytes)),
    close: (code, reason) => ws.close(code, reason),
    on: (type, listener) => events.on(type, listener),
    off: (type, listener) => events.off(type, listener),
  };
}

/** `text`, or for an answer over the limit the RESOURCE_EXHAUSTED error that replaces it. */
function answerWithin(text: string, maxFrameBytes: number): string {
  const tooLarge = replyTooLarge('the request', text, maxFrameBytes);
  if (!tooLarge) return text;
  const msg = readMessage(text);
  return msg.kind === 'response' ? JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: tooLarge.toJsonRpc() }) : text;
}

/** The error answer the gate sends for one frame, or undefined to let it through. */
function refusalOf(text: string): Record<string, unknown> | undefined {
  const msg = readMessage(text);
  if (msg.kind === 'invalid')
    return { jsonrpc: '2.0', id: null, error: { code: msg.code, message: msg.message, data: { code: 'INVALID_ARGUMENT' } } };
  if (msg.kind === 'request' && !ACP_AGENT_METHODS.has(msg.method)) {
    return { jsonrpc: '2.0', id: msg.id, error: { code: JSONRPC_CODES.methodNotFound, message: `method not found: ${msg.method}` } };
  }
  return undefined;
}

/**
 * Ends an `/acp` connection for a reason of ours (a revoked or expired token): the editor is
 * told with {@link ACP_CLOSING_NOTIFICATION} (`{code, message}`), then the WebSocket closes with
 * the code's close code (4403 revoked, 4401 expired) and the message as its reason.
 */
export function closeAcpSocket(ws: WebSocket, code: ErrorCode, message: string): void {
  if (ws.readyState !== ws.OPEN) return;
  ws.send(JSON.stringify({ jsonrpc: '2.0', method: ACP_CLOSING_NOTIFICATION, params: { code, message } }));
  ws.close(ERROR_TABLE[code].wsClose, message.slice(0, 120));
}
