import { JSONRPC_INVALID_REQUEST, JSONRPC_PARSE_ERROR } from '../errors.js';

/**
 * How one text frame is read as one JSON-RPC 2.0 message, for every JSON-RPC speaker of the
 * house (the native protocol, the JSON-RPC dialect, the ACP gate, the web page). Written by
 * hand and free of zod at run time, so the web page bundles it without zod; the schemas in
 * core/protocol/jsonrpc.ts are the definition (`classifyBySchema`), and
 * test/fast-checks.test.ts holds {@link classify} to the same answers.
 */

/** A request's id: a string of at most 128 characters or a safe integer. */
export type RpcId = string | number;

export interface RpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export type RpcMessage =
  | { kind: 'request'; id: RpcId; method: string; params: unknown }
  | { kind: 'notification'; method: string; params: unknown }
  | { kind: 'response'; id: RpcId | null; result?: unknown; error?: RpcErrorObject };

/** A frame read: one message, or why it is not one (the JSON-RPC code to answer with, id null). */
export type Incoming = RpcMessage | { kind: 'invalid'; code: number; message: string };

/** Longest method name and string id. */
const MAX_NAME = 128;

const isId = (v: unknown): v is RpcId => Number.isSafeInteger(v) || (typeof v === 'string' && v.length <= MAX_NAME);
const isMethod = (v: unknown): v is string => typeof v === 'string' && v.length >= 1 && v.length <= MAX_NAME;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads one frame; never throws. Batches are refused: one message per frame. */
export function readMessage(text: string): Incoming {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: 'invalid', code: JSONRPC_PARSE_ERROR, message: 'parse error: the frame is not valid JSON' };
  }
  return classify(value) ?? { kind: 'invalid', code: JSONRPC_INVALID_REQUEST, message: `invalid request: ${whyInvalid(value)}` };
}

/**
 * Classifies a parsed JSON value as one JSON-RPC message, or returns undefined: a message with
 * a `method` is a request (with an id) or a notification (without); one without is a response,
 * which carries either `result` (and an id) or `error` (a code and a message; id null when the
 * peer could not read ours).
 */
export function classify(value: unknown): RpcMessage | undefined {
  if (!isObject(value) || value.jsonrpc !== '2.0') return undefined;
  if ('method' in value) {
    if (!isMethod(value.method)) return undefined;
    if (!('id' in value)) return { kind: 'notification', method: value.method, params: value.params };
    return isId(value.id) ? { kind: 'request', id: value.id, method: value.method, params: value.params } : undefined;
  }
  if ('result' in value === 'error' in value) return undefined;
  if ('result' in value) return isId(value.id) ? { kind: 'response', id: value.id, result: value.result } : undefined;
  const e = value.error;
  if (!isObject(e) || !Number.isSafeInteger(e.code) || typeof e.message !== 'string') return undefined;
  if (value.id !== null && !isId(value.id)) return undefined;
  const error: RpcErrorObject = { code: e.code as number, message: e.message };
  if ('data' in e) error.data = e.data;
  return { kind: 'response', id: value.id, error };
}

/** What is wrong with a value {@link classify} refused, in a few words for the peer. */
function whyInvalid(value: unknown): string {
  if (Array.isArray(value)) return 'batches are not supported (one message per frame)';
  if (!isObject(value)) return 'not a JSON object';
  if (value.jsonrpc !== '2.0') return 'not a JSON-RPC 2.0 object ("jsonrpc": "2.0")';
  if ('method' in value && !isMethod(value.method)) return `"method" must be a string of 1 to ${MAX_NAME} characters`;
  if (!('method' in value) && 'result' in value === 'error' in value)
    return 'neither a request, a notification nor a response (a response carries "result" or "error", not both)';
  if ('method' in value || 'result' in value) return `"id" must be a string of at most ${MAX_NAME} characters or a safe integer`;
  return 'a response error needs an integer "code", a string "message" and an id (or null)';
}
