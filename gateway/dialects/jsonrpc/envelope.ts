import { RpcId } from '../../../core/protocol/jsonrpc.js';
import { JSONRPC_CODES } from '../../../core/protocol/jsonrpc-dialect.js';

/** One text frame from a dialect client, read as a JSON-RPC 2.0 message (docs/jsonrpc-dialect.md, Rules). */
export type Incoming =
  | { kind: 'request'; id: RpcId; method: string; params: unknown }
  | { kind: 'response'; id: RpcId; result?: unknown; error?: { code: number; message: string } }
  /** A notification from the client: none are defined, so every one is ignored. */
  | { kind: 'notification' }
  /** Not a message we can act on: answer with this error (`id` null when the message had no usable id). */
  | { kind: 'invalid'; id: RpcId | null; code: number; message: string };

/** Reads one frame; never throws. Batches are refused (one message per frame). */
export function readMessage(text: string): Incoming {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return invalid(null, JSONRPC_CODES.parseError, 'parse error: the frame is not valid JSON');
  }
  if (Array.isArray(msg)) return invalid(null, JSONRPC_CODES.invalidRequest, 'invalid request: batches are not supported (one message per frame)');
  if (!isObj(msg) || msg.jsonrpc !== '2.0') return invalid(idOf(msg), JSONRPC_CODES.invalidRequest, 'invalid request: not a JSON-RPC 2.0 object ("jsonrpc": "2.0")');
  const id = RpcId.safeParse(msg.id);
  if ('method' in msg) {
    if (typeof msg.method !== 'string') return invalid(idOf(msg), JSONRPC_CODES.invalidRequest, 'invalid request: "method" must be a string');
    if (!('id' in msg)) return { kind: 'notification' };
    if (!id.success) return invalid(null, JSONRPC_CODES.invalidRequest, 'invalid request: "id" must be a string or an integer');
    return { kind: 'request', id: id.data, method: msg.method, params: msg.params };
  }
  if (id.success && ('result' in msg || 'error' in msg)) {
    const error = isObj(msg.error) ? { code: Number(msg.error.code), message: String(msg.error.message) } : undefined;
    return { kind: 'response', id: id.data, result: msg.result, error };
  }
  return invalid(idOf(msg), JSONRPC_CODES.invalidRequest, 'invalid request: neither a request nor a response');
}

function invalid(id: RpcId | null, code: number, message: string): Incoming {
  return { kind: 'invalid', id, code, message };
}

/** The id of a malformed message when it has a usable one (so the error can name it), else null. */
function idOf(msg: unknown): RpcId | null {
  if (!isObj(msg)) return null;
  const id = RpcId.safeParse(msg.id);
  return id.success ? id.data : null;
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
