import { z } from 'zod';

/** JSON-RPC 2.0 envelopes. Method payloads are validated separately (methods.ts). */
export const RpcId = z.union([z.string().max(128), z.number().int()]);
export type RpcId = z.infer<typeof RpcId>;

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

export const RpcResponse = z.union([
  z.object({ jsonrpc: z.literal('2.0'), id: RpcId, result: z.unknown() }),
  z.object({ jsonrpc: z.literal('2.0'), id: RpcId.nullable(), error: RpcErrorObject }),
]);

export type RpcMessage =
  | { kind: 'request'; id: RpcId; method: string; params: unknown }
  | { kind: 'notification'; method: string; params: unknown }
  | { kind: 'response'; id: RpcId | null; result?: unknown; error?: z.infer<typeof RpcErrorObject> };

/**
 * Classifies a parsed JSON value as one JSON-RPC message, or returns undefined. Requests and
 * notifications of the usual form are read by hand (every message goes through here); the
 * schemas above decide everything else, and test/fast-checks.test.ts holds the two to the same answers.
 */
export function classify(value: unknown): RpcMessage | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const v = value as Record<string, unknown>;
  if ('method' in v) {
    const method = v.method;
    if (v.jsonrpc === '2.0' && typeof method === 'string' && method.length >= 1 && method.length <= 128) {
      if (!('id' in v)) return { kind: 'notification', method, params: v.params };
      const id = v.id;
      if (Number.isSafeInteger(id) || (typeof id === 'string' && id.length <= 128)) return { kind: 'request', id: id as RpcId, method, params: v.params };
    }
  }
  return classifyBySchema(v);
}

/** {@link classify} by the schemas alone: the definition the hand-written part is tested against. */
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
  const res = RpcResponse.safeParse(v);
  if (!res.success) return undefined;
  return 'error' in res.data
    ? { kind: 'response', id: res.data.id, error: res.data.error }
    : { kind: 'response', id: res.data.id, result: res.data.result };
}
