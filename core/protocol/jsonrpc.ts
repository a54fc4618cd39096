import { z } from 'zod';
import type { RpcId as Id, RpcMessage } from '../rpc/envelope.js';

/** JSON-RPC 2.0 envelopes. Method payloads are validated separately (methods.ts). */
export const RpcId = z.union([z.string().max(128), z.number().int()]);
/** The same as the hand-written reader's (core/rpc/envelope.ts). */
export type RpcId = Id;

export const RpcRequest = z.object({
  jsonrpc: z.literal('2.0'),
  id: RpcId,
  method: z.string().min(1).max(128),
  params: z.unknown().optional(),
});

export const RpcNotification = z.object({
  jsonrpc: z.literal('2.0'),
  method: z.string().min(1).max(128),
  params: z.unknown().optional(),
});

export const RpcErrorObject = z.object({
  code: z.number().int(),
  message: z.string(),
  data: z.unknown().optional(),
});

/** A response: an error (id null when the peer could not read ours) or a result. */
export const RpcResponse = z.union([
  z.object({ jsonrpc: z.literal('2.0'), id: RpcId.nullable(), error: RpcErrorObject }),
  z.object({ jsonrpc: z.literal('2.0'), id: RpcId, result: z.unknown() }),
]);

/**
 * One JSON-RPC message by the schemas alone: the definition that the hand-written `classify`
 * (core/rpc/envelope.ts, which every peer reads with) is tested against. A response carries
 * `result` or `error`, never both.
 */
export function classifyBySchema(value: unknown): RpcMessage | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const v = value as Record<string, unknown>;
  if ('method' in v) {
    if ('id' in v) {
      const r = RpcRequest.safeParse(v);
      return r.success ? { kind: 'request', id: r.data.id, method: r.data.method, params: r.data.params } : undefined;
    }
    const n = RpcNotification.safeParse(v);
    return n.success ? { kind: 'notification', method: n.data.method, params: n.data.params } : undefined;
  }
  if ('result' in v === 'error' in v) return undefined;
  const res = RpcResponse.safeParse(v);
  if (!res.success) return undefined;
  return 'error' in res.data
    ? { kind: 'response', id: res.data.id, error: res.data.error }
    : { kind: 'response', id: res.data.id, result: res.data.result };
}
