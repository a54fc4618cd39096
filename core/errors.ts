/**
 * The one error vocabulary: gRPC's canonical codes. Every error that crosses a process
 * boundary carries one of these; code maps to a gRPC status, a WebSocket close code and a
 * JSON-RPC error code in {@link ERROR_TABLE}. Switch on `code`, never on `message`.
 */
export const ERROR_CODES = [
  'CANCELLED',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'UNAUTHENTICATED',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface ErrorCodeInfo {
  /** gRPC status number. */
  grpc: number;
  /** WebSocket close code used when this error ends a connection (4000–4999). */
  wsClose: number;
  /** JSON-RPC error code used in error responses. */
  jsonRpc: number;
  /** Whether retrying the same operation later can help. */
  retryable: boolean;
}

/** Complete mapping; a test checks every code has a row and that no number is reused. */
export const ERROR_TABLE: Record<ErrorCode, ErrorCodeInfo> = {
  CANCELLED: { grpc: 1, wsClose: 4001, jsonRpc: -32001, retryable: true },
  INVALID_ARGUMENT: { grpc: 3, wsClose: 4003, jsonRpc: -32602, retryable: false },
  DEADLINE_EXCEEDED: { grpc: 4, wsClose: 4004, jsonRpc: -32004, retryable: true },
  NOT_FOUND: { grpc: 5, wsClose: 4005, jsonRpc: -32005, retryable: false },
  ALREADY_EXISTS: { grpc: 6, wsClose: 4006, jsonRpc: -32006, retryable: false },
  PERMISSION_DENIED: { grpc: 7, wsClose: 4403, jsonRpc: -32007, retryable: false },
  RESOURCE_EXHAUSTED: { grpc: 8, wsClose: 4008, jsonRpc: -32008, retryable: true },
  FAILED_PRECONDITION: { grpc: 9, wsClose: 4009, jsonRpc: -32009, retryable: false },
  ABORTED: { grpc: 10, wsClose: 4010, jsonRpc: -32010, retryable: true },
  UNIMPLEMENTED: { grpc: 12, wsClose: 4012, jsonRpc: -32601, retryable: false },
  INTERNAL: { grpc: 13, wsClose: 4013, jsonRpc: -32603, retryable: false },
  UNAVAILABLE: { grpc: 14, wsClose: 4014, jsonRpc: -32014, retryable: true },
  UNAUTHENTICATED: { grpc: 16, wsClose: 4401, jsonRpc: -32016, retryable: false },
};

/** JSON-RPC's own parse error; not a canonical code because no request could be read. */
export const JSONRPC_PARSE_ERROR = -32700;
/** JSON-RPC "invalid request" (not a request object at all). */
export const JSONRPC_INVALID_REQUEST = -32600;

/** The one error class. `details` must be safe to send over the wire (no stacks, no secrets). */
export class TetherError extends Error {
  readonly code: ErrorCode;
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'TetherError';
    this.code = code;
    this.details = details;
  }

  get retryable(): boolean {
    return ERROR_TABLE[this.code].retryable;
  }

  /** Wire form for a JSON-RPC error response. */
  toJsonRpc(): { code: number; message: string; data: { code: ErrorCode } & Record<string, unknown> } {
    return { code: ERROR_TABLE[this.code].jsonRpc, message: this.message, data: { ...this.details, code: this.code } };
  }

  /** Rebuilds an error received in a JSON-RPC error response. */
  static fromJsonRpc(err: { code: number; message: string; data?: unknown }): TetherError {
    const data = (err.data ?? {}) as Record<string, unknown>;
    const named = typeof data.code === 'string' && (ERROR_CODES as readonly string[]).includes(data.code);
    const code = named ? (data.code as ErrorCode) : codeFromJsonRpc(err.code);
    const { code: _omit, ...rest } = data;
    return new TetherError(code, err.message, Object.keys(rest).length ? rest : undefined);
  }
}

function codeFromJsonRpc(n: number): ErrorCode {
  if (n === JSONRPC_PARSE_ERROR || n === JSONRPC_INVALID_REQUEST) return 'INVALID_ARGUMENT';
  for (const code of ERROR_CODES) if (ERROR_TABLE[code].jsonRpc === n) return code;
  return 'INTERNAL';
}

/** Maps a WebSocket close code back to a canonical code, if it is one of ours. */
export function codeFromWsClose(closeCode: number): ErrorCode | undefined {
  for (const code of ERROR_CODES) if (ERROR_TABLE[code].wsClose === closeCode) return code;
  return undefined;
}

/** Maps a gRPC status number to a canonical code. */
export function codeFromGrpc(status: number): ErrorCode {
  for (const code of ERROR_CODES) if (ERROR_TABLE[code].grpc === status) return code;
  return 'UNAVAILABLE';
}

/** Normalises anything thrown into a TetherError without leaking stacks. */
export function asTetherError(err: unknown, fallback: ErrorCode = 'INTERNAL'): TetherError {
  if (err instanceof TetherError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new TetherError(fallback, message);
}
