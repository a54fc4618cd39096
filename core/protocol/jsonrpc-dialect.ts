import { WorktreeRequest } from './worktree.js';
import { z } from 'zod';
import { SessionTitle } from './inbox.js';
import { SESSIONS_PAGE_MAX } from './methods.js';
import { PermissionMode } from './session-options.js';
import { PromptPriority } from './events.js';
import { FolderQuery } from './folder-view.js';

/**
 * The JSON-RPC dialect for thin frontends (docs/jsonrpc-dialect.md): plain JSON-RPC 2.0
 * requests and notifications that never show the engine's stream-json. A client picks it at
 * connect time; the gateway translates (gateway/dialects/jsonrpc/).
 */

/** WebSocket subprotocol that selects the dialect. */
export const JSONRPC_SUBPROTOCOL = 'tether-jsonrpc.v1';
/** gRPC metadata key and value that select the dialect. */
export const DIALECT_METADATA_KEY = 'tether-dialect';
export const JSONRPC_DIALECT = 'jsonrpc';
/** The dialect's own version (major must match). */
export const JSONRPC_DIALECT_VERSION = '1.0';

/** Which dialect a connection speaks: the native protocol (docs/protocol.md) or this one. */
export type Dialect = 'native' | 'jsonrpc';

/**
 * The dialect a gRPC call's `tether-dialect` metadata names: absent is native, `jsonrpc` the
 * dialect; anything else is undefined (the gateway refuses the call rather than guess).
 */
export function grpcDialect(value: string | undefined): Dialect | undefined {
  if (value === undefined) return 'native';
  return value === JSONRPC_DIALECT ? 'jsonrpc' : undefined;
}

/** Whether a Sec-WebSocket-Protocol header offers the dialect. */
export function offersJsonRpcDialect(header: string | undefined): boolean {
  return (header ?? '').split(',').some((p) => p.trim() === JSONRPC_SUBPROTOCOL);
}

/**
 * Optional features; the gateway sends a notification or request of a feature only when the
 * client listed it in `initialize`. `turn_complete` and responses are always sent.
 */
export const DIALECT_CAPABILITIES = [
  'streaming',
  'tools',
  'permissions',
  'questions',
  'progress',
  'presence',
  'session_state',
  'queue',
] as const;
export type DialectCapability = (typeof DIALECT_CAPABILITIES)[number];

/**
 * Notifications the gateway sends, each with the capability that turns it on (`null`: always
 * sent; `permission_withdrawn` only ever concerns a request the client was sent).
 */
export const DIALECT_NOTIFICATIONS = {
  assistant_token: 'streaming',
  tool_use_start: 'tools',
  tool_result: 'tools',
  turn_complete: null,
  session_state: 'session_state',
  presence: 'presence',
  progress: 'progress',
  permission_withdrawn: null,
  queued: 'queue',
} as const satisfies Record<string, DialectCapability | null>;
export type DialectNotification = keyof typeof DIALECT_NOTIFICATIONS;

/** Requests the gateway sends the client, with the capability that turns each on. */
export const DIALECT_CLIENT_REQUESTS = { permission_request: 'permissions', user_question: 'questions' } as const satisfies Record<
  string,
  DialectCapability
>;

const sessionId = z.string().min(1).max(128);

/** Params of each request a client may send, defined once; unknown members are ignored. */
export const DialectRequests = {
  initialize: z.object({
    protocol_version: z.string().min(1).max(32),
    capabilities: z.array(z.string().max(64)).max(64).default([]),
    /** Report this session's engine (tools, MCP servers, model) in the result. */
    session_id: sessionId.optional(),
  }),
  user_message: z.object({
    session_id: sessionId,
    content: z.union([z.string().min(1).max(1_000_000), z.array(z.record(z.string(), z.unknown())).min(1).max(100)]),
    /** Where it goes while a turn runs (default `later`; `now` steers). */
    priority: PromptPriority.optional(),
    /** The prompt's uuid, which `withdraw` names (default: one the gateway chooses, shown in `queued`). */
    uuid: z.string().uuid().optional(),
  }),
  interrupt: z.object({ session_id: sessionId, clear_queue: z.boolean().optional() }),
  /** Withdraws a queued prompt (its author or the session's owner) before it starts. */
  withdraw: z.object({ session_id: sessionId, uuid: z.string().min(1).max(256) }),
  set_model: z.object({ session_id: sessionId, model: z.string().min(1).max(256).nullable() }),
  set_permission_mode: z.object({ session_id: sessionId, mode: PermissionMode }),
  session_create: z.object({
    agent: z.string().min(1).max(128),
    cwd: z.string().min(1).max(4096).optional(),
    model: z.string().min(1).max(256).optional(),
    permission_mode: PermissionMode.optional(),
    /** Run in a fresh git worktree of the repository `cwd` is in (core/protocol/worktree.ts); the answer says where. */
    worktree: WorktreeRequest.optional(),
  }),
  session_attach: z.object({ session_id: sessionId, from_seq: z.number().int().nonnegative().optional() }),
  /** The session's owner (or an admin) renames it; every member of either wire reads `title_changed`. */
  session_rename: z.object({ session_id: sessionId, title: SessionTitle }),
  /** One page with `limit` (at most 500) or `cursor` (the `next_cursor` of the page before); every session without either. */
  session_list: z
    .object({ limit: z.number().int().min(1).max(SESSIONS_PAGE_MAX).optional(), cursor: z.string().min(1).max(256).optional() })
    .default({}),
  /** Reads the session's folder on its agent (branch, changes, diffs, commits, files): the native `session.folder`, viewers too. */
  session_folder: z.object({ session_id: sessionId, query: FolderQuery }),
} as const;
export type DialectMethod = keyof typeof DialectRequests;

/** What a client answers to `permission_request`. */
export const PermissionDecision = z.object({
  decision: z.enum(['allow', 'deny']),
  scope: z.enum(['once', 'session']).default('once'),
  message: z.string().max(10_000).optional(),
});
export type PermissionDecision = z.infer<typeof PermissionDecision>;

/** What a client answers to `user_question`: answers keyed by question text, or a dismissal. */
export const QuestionAnswer = z.object({
  answers: z.record(z.string(), z.string().max(100_000)).optional(),
  dismissed: z.boolean().optional(),
});
export type QuestionAnswer = z.infer<typeof QuestionAnswer>;

/** How risky a tool call is, as `permission_request.risk_level` says. */
export type RiskLevel = 'low' | 'medium' | 'high';

/** JSON-RPC 2.0's own error codes (the spec's reserved range). */
export const JSONRPC_CODES = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
} as const;
