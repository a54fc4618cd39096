/**
 * The one error vocabulary: gRPC's canonical codes. Every error that crosses a process
 * boundary carries one of these; code maps to a gRPC status, a WebSocket close code, a
 * JSON-RPC error code and an HTTP status in {@link ERROR_TABLE}. Switch on `code`, never on `message`.
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
  /** HTTP status of an HTTP answer carrying this error (a refused WebSocket upgrade, POST /v1/ticket, POST /v1/login). */
  http: number;
  /** Whether retrying the same operation later can help. */
  retryable: boolean;
}

/**
 * A code's row: its gRPC status and whether a retry helps. The other numbers follow from the
 * status unless the row names them: WebSocket close 4000 + status (4401 and 4403 mirror
 * HTTP), JSON-RPC -32000 - status (JSON-RPC's own codes where it has one), HTTP 500.
 */
type ErrorRow = Pick<ErrorCodeInfo, 'grpc' | 'retryable'> & Partial<ErrorCodeInfo>;

const ROWS: Record<ErrorCode, ErrorRow> = {
  CANCELLED: { grpc: 1, retryable: true },
  INVALID_ARGUMENT: { grpc: 3, jsonRpc: -32602, http: 400, retryable: false },
  DEADLINE_EXCEEDED: { grpc: 4, retryable: true },
  NOT_FOUND: { grpc: 5, http: 404, retryable: false },
  ALREADY_EXISTS: { grpc: 6, retryable: false },
  PERMISSION_DENIED: { grpc: 7, wsClose: 4403, http: 403, retryable: false },
  RESOURCE_EXHAUSTED: { grpc: 8, http: 429, retryable: true },
  FAILED_PRECONDITION: { grpc: 9, http: 400, retryable: false },
  ABORTED: { grpc: 10, retryable: true },
  UNIMPLEMENTED: { grpc: 12, jsonRpc: -32601, retryable: false },
  INTERNAL: { grpc: 13, jsonRpc: -32603, retryable: false },
  UNAVAILABLE: { grpc: 14, http: 503, retryable: true },
  UNAUTHENTICATED: { grpc: 16, wsClose: 4401, http: 401, retryable: false },
};

/** Complete mapping; a test checks every code has a row and that no number is reused. */
export const ERROR_TABLE = Object.fromEntries(
  ERROR_CODES.map((code) => [code, { wsClose: 4000 + ROWS[code].grpc, jsonRpc: -32000 - ROWS[code].grpc, http: 500, ...ROWS[code] }]),
) as Record<ErrorCode, ErrorCodeInfo>;

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

/** The HTTP status an HTTP answer uses for a canonical code. */
export function httpStatusOf(code: ErrorCode): number {
  return ERROR_TABLE[code].http;
}

/** The codes an HTTP refusal is taken at its word for: what the gateway's door answers a WebSocket upgrade with. */
const HTTP_REFUSAL_CODES: readonly ErrorCode[] = ['INVALID_ARGUMENT', 'UNAUTHENTICATED', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED'];
/** Node's own answer to request headers past its size limit, before the door sees them. */
const HTTP_HEADERS_TOO_LARGE = 431;

/**
 * Maps the HTTP status of a refused WebSocket upgrade back to a canonical code: the door's
 * refusals (400, 401, 403, 429) and 431 (headers too large: INVALID_ARGUMENT) keep their
 * meaning; anything else (a proxy's 404 or 502, a gateway not up yet) is UNAVAILABLE, which a
 * dialer retries.
 */
export function codeFromHttpRefusal(status: number): ErrorCode {
  if (status === HTTP_HEADERS_TOO_LARGE) return 'INVALID_ARGUMENT';
  return HTTP_REFUSAL_CODES.find((code) => ERROR_TABLE[code].http === status) ?? 'UNAVAILABLE';
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
