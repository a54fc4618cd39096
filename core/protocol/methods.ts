import { z } from 'zod';
import { EngineKind, SessionOptions } from './session-options.js';
import { Role, SessionState, TetherEvent } from './events.js';
import { AuditQuery, AuditResult } from './audit.js';
import { UsageQuery, UsageResult } from './usage.js';
import { RpcErrorObject } from './jsonrpc.js';
import { TraceContext } from './trace-context.js';
import { WorktreeInfo } from './worktree.js';
import { InboxItem, SessionTitle } from './inbox.js';
import { FolderQuery, FolderResult } from './folder-view.js';

/**
 * Every method of the gateway protocol, defined once. Requests carry an id and get a
 * response; notifications do not. docs/protocol.md describes each; a test checks that every
 * method here is documented there.
 */

const id = z.string().min(1).max(128);
const seq = z.number().int().nonnegative();

export const PeerRole = z.enum(['agent', 'client']);

/** An agent's proof that it holds its host key (core/auth/host-key.ts). */
export const HostKeyProof = z.object({
  /** Ed25519 public key, SPKI DER, base64. */
  public_key: z.string().max(128),
  signed_at_ms: z.number().int(),
  /** Ed25519 signature of "tether-agent-hello\n<name>\n<signed_at_ms>", base64. */
  signature: z.string().max(128),
});
export type HostKeyProof = z.infer<typeof HostKeyProof>;

/** Engine kind → its `--version` line. */
export const EngineVersions = z.partialRecord(EngineKind, z.string().max(256));

/**
 * How hard a stop starts: `eof` (default) closes the engine's stdin and escalates after the
 * agent's graces; `SIGTERM` signals at once (what a local `kill` of the CLI does), SIGKILL
 * after the term grace; `SIGKILL` kills at once. A harder stop escalates one in progress.
 */
export const StopSignal = z.enum(['eof', 'SIGTERM', 'SIGKILL']);
export type StopSignal = z.infer<typeof StopSignal>;

export const AgentDescriptor = z.object({
  name: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, dash and underscore only'),
  host: z.string().max(256),
  engines: z.array(EngineKind).min(1),
  default_engine: EngineKind,
  labels: z.record(z.string(), z.string()).default({}),
  /** What each engine answers to `--version`, in its own format (e.g. `2.1.332 (Claude Code)`). */
  engine_versions: EngineVersions.optional(),
  /** Whether the agent lets sessions run in bypassPermissions (its --allow-bypass-permissions); absent: not said. */
  allows_bypass_permissions: z.boolean().optional(),
  /** Sessions the agent still runs, with the next output seq it will send (for resume). */
  sessions: z.array(z.object({ session_id: id, next_seq: seq, last_input_seq: seq.default(0) })).default([]),
  /** Present when the agent holds a host key; the gateway pins its first key per agent identity. */
  host_key: HostKeyProof.optional(),
  /** The control requests the agent's owner lets sessions send although they are not safe (core/engine-controls.ts). */
  allow_engine_controls: z.array(z.string().max(64)).max(64).optional(),
});
export type AgentDescriptor = z.infer<typeof AgentDescriptor>;

export const HelloParams = z.object({
  protocol_version: z.string().max(32),
  role: PeerRole,
  capabilities: z.array(z.string().max(64)).max(64).default([]),
  agent: AgentDescriptor.optional(),
  /** Client software name, for presence and logs. */
  software: z.string().max(128).optional(),
});
export const HelloResult = z.object({
  protocol_version: z.string(),
  gateway_id: z.string(),
  capabilities: z.array(z.string()),
  principal: z.string(),
  /** The principal's display name from the identity provider, where known (a browser signed in with it); `principal` stays the stable subject. */
  principal_name: z.string().optional(),
  /** When this connection's token expires (ISO 8601; absent without one): renew before it with auth.renew. */
  token_expires_at: z.string().optional(),
  /** Clients: what this token lets them do, so they offer no control they cannot use (the gateway still checks every call). */
  may: z.object({ create: z.boolean(), control: z.boolean() }).optional(),
});

export const ClientInfo = z.object({
  client_id: z.string(),
  principal: z.string(),
  role: Role,
  transport: z.string(),
  since: z.string(),
  /** Whether its token allows control (absent: not known). */
  may_control: z.boolean().optional(),
  /** The member's display name from the identity provider (OIDC sign-in), when known; `principal` stays the stable subject. */
  name: z.string().max(256).optional(),
});

/**
 * The most members an attach answer lists (the earliest attached): the k-th member of a
 * session would otherwise get k entries, N²/2 for a session of N, written out as the whole
 * session attaches. The rest are one `session.info` away (its `clients` is whole).
 */
export const ATTACH_MEMBERS_LISTED = 16;

export const SessionInfo = z.object({
  id,
  agent: z.string(),
  engine: EngineKind,
  owner: z.string(),
  /** The owner's display name from the identity provider, where the gateway has seen one; `owner` stays the stable subject. */
  owner_name: z.string().max(256).optional(),
  state: SessionState,
  created_at: z.string(),
  /** The members attached; an attach answer lists at most ATTACH_MEMBERS_LISTED of them (see `client_count`). */
  clients: z.array(ClientInfo),
  /**
   * How many members are attached in all. Where it is more than `clients` holds (an attach
   * answer), `session.info` lists everyone. Absent (older gateways): `clients` is everyone.
   */
  client_count: z.number().int().nonnegative().optional(),
  pending_prompts: z.number().int(),
  last_seq: z.number().int(),
  options: SessionOptions,
  /** In a cluster: the gateway that holds the session (its agent's). */
  gateway: z.string().optional(),
  /** The session's agent is away (its link dropped or it restarted) since then (ISO time); absent while it is connected. */
  agent_away_since: z.string().optional(),
  /** While the agent is away: inputs waiting for it (bounded), sent when it is back. */
  queued_inputs: z.number().int().nonnegative().optional(),
  /** The session's git worktree (options.worktree), as its agent last reported it; kept after the end when it was dirty. */
  worktree: WorktreeInfo.optional(),
  /** The session's title: the engine's own, else the owner's rename, else its first prompt; absent before any. */
  title: z.string().optional(),
});
export type SessionInfo = z.infer<typeof SessionInfo>;

export const AgentInfo = z.object({
  name: z.string(),
  host: z.string(),
  engines: z.array(EngineKind),
  default_engine: EngineKind,
  labels: z.record(z.string(), z.string()),
  engine_versions: EngineVersions.optional(),
  /** Whether sessions on it may use bypassPermissions (absent: not said), so clients do not offer it where it is refused. */
  allows_bypass_permissions: z.boolean().optional(),
  sessions: z.array(z.string()),
  connected_at: z.string(),
  transport: z.string(),
  /** In a cluster: the gateway the agent is connected to. */
  gateway: z.string().optional(),
});
export type AgentInfo = z.infer<typeof AgentInfo>;

/** What the agent learned about a line it read, so the gateway never re-parses payloads. */
export const LineMeta = z.object({
  type: z.string().max(128).optional(),
  subtype: z.string().max(128).optional(),
  request_id: z.string().max(256).optional(),
  /** For `result` frames: the engine's verdict (is_error). */
  is_error: z.boolean().optional(),
  /** For `system/session_state_changed`: the new state; for `command_lifecycle`: the prompt's (queued, started, completed, cancelled). */
  state: z.string().max(64).optional(),
  /** For `command_lifecycle`: the uuid of the prompt it is about. */
  command_uuid: z.string().max(256).optional(),
  /** For `system/init`: the engine's own session id, which `--resume` takes after an agent restart. */
  engine_session_id: z.string().max(256).optional(),
  /**
   * For the policy hook's callbacks: the session folder and the tool's path with symlinks
   * followed on the agent's machine (agent/policy-paths.ts), which the gateway cannot see.
   */
  resolved: z
    .object({ cwd: z.string().min(1).max(4096), path: z.string().min(1).max(4096).optional() })
    .strict()
    .optional(),
});
export type LineMeta = z.infer<typeof LineMeta>;

/** A frame the engine reads: any JSON object (the agent re-checks it before writing). */
export const EngineInput = z.record(z.string(), z.unknown());

/** Most sessions one `sessions.list` page may ask for, and how many a page without `limit` holds. */
export const SESSIONS_PAGE_MAX = 500;
export const SESSIONS_PAGE_DEFAULT = 100;

export const Methods = {
  // --- both roles -------------------------------------------------------------------------
  hello: { params: HelloParams, result: HelloResult },
  ping: { params: z.object({}).default({}), result: z.object({}) },
  /** agent or client -> gateway: swap this connection's token for a fresh one of the same principal before it expires. */
  'auth.renew': {
    params: z.object({ token: z.string().min(1).max(8192) }),
    result: z.object({ expires_at: z.string() }),
  },

  // --- gateway -> agent -------------------------------------------------------------------
  'agent.spawn': {
    params: z.object({
      session_id: id,
      engine: EngineKind.optional(),
      options: SessionOptions,
      /** The gateway enforces a central policy: register its PreToolUse hook (docs/policy.md). */
      policy_hook: z.boolean().optional(),
      /** The policy's working folders for this agent, checked again on its machine through symlinks. */
      policy_roots: z.object({ rule: z.string().max(8192), folders: z.array(z.string().min(1).max(4096)).min(1).max(1000) }).optional(),
      /**
       * The session outlived its engine (the agent restarted): the new engine continues the
       * session's numbering, output at `next_seq`, inputs after `last_input_seq` (docs/protocol.md,
       * "A session across agent restarts and moves"). `options.resume` names the transcript.
       */
      continue_at: z.object({ next_seq: seq, last_input_seq: z.number().int().nonnegative() }).strict().optional(),
      /** A session moved here from another agent: its engine's transcript, written where the engine looks before it starts with `--resume`. */
      transcript: z
        .object({ engine_session_id: z.string().min(1).max(64), jsonl: z.string().max(8 * 1024 * 1024) })
        .strict()
        .optional(),
      /** The create's trace (tracing on): the engine's TRACEPARENT. */
      trace: TraceContext.optional(),
    }),
    result: z.object({ pid: z.number().int(), engine: EngineKind, engine_version: z.string().optional() }),
  },
  /**
   * A move: at a turn boundary, the agent hands over the engine's transcript and stops the
   * engine without reporting its exit (the session goes on at another agent).
   */
  'agent.export': {
    params: z.object({ session_id: id }),
    result: z.object({ engine_session_id: z.string(), jsonl: z.string() }),
  },
  'agent.stop': {
    params: z.object({ session_id: id, reason: z.string().max(256).optional(), signal: StopSignal.optional() }),
    result: z.object({}),
  },
  /** A read of the session's folder (core/protocol/folder-view.ts), for a member the gateway let through. */
  'agent.folder': { params: z.object({ session_id: id, query: FolderQuery }), result: FolderResult },

  // --- client -> gateway ------------------------------------------------------------------
  'agents.list': { params: z.object({}).default({}), result: z.object({ agents: z.array(AgentInfo) }) },
  /**
   * The sessions this principal may see, ordered by id. Each carries only cwd, model and
   * permission_mode of its options (session.info has them all). With `limit` (or `cursor`), one
   * page: at most `limit` (default SESSIONS_PAGE_DEFAULT) after `cursor`, and `next_cursor`
   * while there are more. Without either, every session in one answer (the old form): an
   * answer over the frame limit is RESOURCE_EXHAUSTED, never silence.
   */
  'sessions.list': {
    params: z
      .object({
        limit: z.number().int().min(1).max(SESSIONS_PAGE_MAX).optional(),
        /** The `next_cursor` of the page before (opaque). */
        cursor: z.string().min(1).max(256).optional(),
      })
      .default({}),
    result: z.object({ sessions: z.array(SessionInfo), next_cursor: z.string().optional() }),
  },
  /** One session's details, its options whole. */
  'session.info': { params: z.object({ session_id: id }), result: z.object({ session: SessionInfo }) },
  'session.create': {
    params: z.object({
      agent: z.string().min(1).max(128),
      engine: EngineKind.optional(),
      options: SessionOptions.default({}),
      /**
       * Chosen by the client: a create retried with the same id (by the same principal) gets
       * the same session, and never a second engine.
       */
      create_id: id.optional(),
      trace: TraceContext.optional(),
    }),
    result: z.object({ session: SessionInfo, role: Role, client_id: z.string() }),
  },
  'session.attach': {
    params: z.object({
      session_id: id,
      from_seq: seq.optional(),
      read_only: z.boolean().optional(),
      /** The client id this client had before a reconnect: its requests in flight follow it. */
      previous_client_id: z.string().max(64).optional(),
      trace: TraceContext.optional(),
    }),
    result: z.object({ session: SessionInfo, role: Role, client_id: z.string(), next_seq: seq }),
  },
  'session.detach': { params: z.object({ session_id: id }), result: z.object({}) },
  'session.send': {
    params: z.object({ session_id: id, input_id: id, line: EngineInput, trace: TraceContext.optional() }),
    result: z.object({ status: z.enum(['applied', 'duplicate']) }),
  },
  'session.stop': { params: z.object({ session_id: id, signal: StopSignal.optional() }), result: z.object({}) },
  'session.set_role': {
    params: z.object({ session_id: id, client_id: z.string().min(1).max(64), role: z.enum(['controller', 'viewer']) }),
    result: z.object({}),
  },
  /**
   * The owner hands the session to another principal: an attached member's, or one the gateway
   * knows (a connected client's, a session owner's). Audited, kept in the session's history (so
   * it survives a restart), told to every member; the old owner's attachments become controllers.
   */
  /**
   * The owner (or an admin) moves the session to another agent, at a turn boundary: the engine's
   * transcript goes through the gateway and the target resumes it in `cwd` (default: the same
   * path). Same session, same seqs; every member reads the `moved` event.
   */
  'session.move': {
    params: z.object({ session_id: id, agent: z.string().min(1).max(256), cwd: z.string().min(1).max(4096).optional() }),
    result: z.object({}),
  },
  'session.set_owner': {
    params: z.object({ session_id: id, owner: z.string().min(1).max(256) }),
    result: z.object({}),
  },
  /** The owner (or an admin) renames the session: kept in its history, told to every member as `title_changed`. */
  'session.rename': {
    params: z.object({ session_id: id, title: SessionTitle }),
    result: z.object({}),
  },
  /**
   * The caller follows the session (`follow: false` stops): told of its turns' ends, its ending
   * and its agent's loss by push and their own webhooks, as the owner is. Anyone who may see the
   * session; kept with their notification settings. FAILED_PRECONDITION where notifications are off.
   */
  'session.follow': {
    params: z.object({ session_id: id, follow: z.boolean() }),
    result: z.object({}),
  },
  /**
   * What waits for this principal across the fleet, newest first: prompts and questions they
   * may answer (their role and the turn's approval allow it), their sessions that ended or lost their agent.
   */
  'inbox.list': { params: z.object({}).default({}), result: z.object({ items: z.array(InboxItem) }) },
  /**
   * From now on this connection gets `fleet.changed` when an agent, a session or what waits for
   * someone changes anywhere in the fleet (until it closes); it then asks again what it shows.
   */
  'fleet.watch': { params: z.object({}).default({}), result: z.object({}) },
  /** Withdraws a standing rule of the session (the owner, or who granted it); its calls ask again. */
  'session.withdraw_rule': {
    params: z.object({ session_id: id, rule: z.string().min(1).max(4096) }),
    result: z.object({}),
  },
  /** Withdraws a queued prompt before it starts (its author, or the session's owner). */
  'session.withdraw_prompt': {
    params: z.object({ session_id: id, uuid: z.string().min(1).max(256) }),
    result: z.object({}),
  },
  /** Reads the session's folder on its agent (branch, changes, diffs, commits, files): any member, viewers too. */
  'session.folder': { params: z.object({ session_id: id, query: FolderQuery }), result: FolderResult },
  /** The audit trail, filtered; without session_id (the whole trail) admins only. */
  'session.audit': { params: AuditQuery, result: AuditResult },
  /** The usage ledger summed: admins every turn, anyone else the turns they started and their sessions' turns. */
  'usage.read': { params: UsageQuery, result: UsageResult },
} as const;

/**
 * Notifications that travel as binary frames: the header is `{"method", "params"}` JSON with
 * these params, the body is bytes carried untouched (never escaped into JSON text).
 */
export const BinaryNotifications = {
  /**
   * agent -> gateway: one engine stdout line; the body is the line exactly as the engine wrote
   * it (without its newline), numbered where it is read.
   */
  'session.output': z.object({
    session_id: id,
    seq,
    meta: LineMeta,
    /** When the agent read the line from the engine (epoch ms; optional, for the gateway's relay latency). */
    read_at_ms: z.number().int().nonnegative().optional(),
    /** Capability `acks.folded.v1`: every input of this session up to here was written to the engine (cumulative). */
    input_ack: seq.optional(),
    /** Tracing on: the first line of each group the agent read at once carries the group's span. */
    trace: TraceContext.optional(),
  }),
} as const;

/**
 * Each binary notification's header as `JSON.stringify({ method, params })` would write it for
 * params of its schema, serialized by hand: the agent writes one per engine line, and the
 * generic serializer costs three times as much.
 */
export const BinaryHeaders: { [N in BinaryNotificationName]: (params: BinaryNotificationParams<N>) => string } = {
  'session.output': (p) =>
    `{"method":"session.output","params":{"session_id":${JSON.stringify(p.session_id)},"seq":${p.seq},"meta":${JSON.stringify(p.meta)}` +
    `${p.read_at_ms === undefined ? '' : `,"read_at_ms":${p.read_at_ms}`}${p.input_ack === undefined ? '' : `,"input_ack":${p.input_ack}`}` +
    `${p.trace === undefined ? '' : `,"trace":${JSON.stringify(p.trace)}`}}}`,
};
/** Every field of session.output that its hand-written header writes: a field added to the schema and not here fails to compile. */
const OUTPUT_HEADER_FIELDS = ['session_id', 'seq', 'meta', 'read_at_ms', 'input_ack', 'trace'] as const;
const outputHeaderComplete: Exclude<keyof BinaryNotificationParams<'session.output'>, (typeof OUTPUT_HEADER_FIELDS)[number]> extends never
  ? true
  : never = true;
void outputHeaderComplete;

export const Notifications = {
  /** agent -> gateway: an event about the engine (exit, diagnostics), in the same seq space. */
  'session.event': z.object({ session_id: id, seq, event: TetherEvent, input_ack: seq.optional() }),
  /** gateway -> agent: one input line for the engine, in the gateway's order. */
  'agent.input': z.object({
    session_id: id,
    seq,
    line: EngineInput,
    /** Capability `acks.folded.v1`: a `session.ack` of this session folded in (cumulative). */
    ack: seq.optional(),
    /** Tracing on: the gateway's span that forwarded this input (its client's trace). */
    trace: TraceContext.optional(),
  }),
  /** agent -> gateway: every input up to `seq` was written to the engine (cumulative). */
  'session.input_ack': z.object({ session_id: id, seq }),
  /** gateway -> agent: cumulative ack of the agent's output seq. */
  'session.ack': z.object({ session_id: id, seq }),
  /**
   * gateway -> client: one frame of a session's stream: an engine line as the raw JSON value
   * `message` (always the last member, exactly as the engine wrote it), or a gateway event.
   * The gateway writes it in one layout, core/wire/session-frame.ts.
   */
  'session.frame': z.object({
    session_id: id,
    seq,
    origin: z.enum(['engine', 'gateway']),
    event: TetherEvent.optional(),
    message: z.record(z.string(), z.unknown()).optional(),
  }),
  /**
   * client -> gateway, capability `session.post.v1`: a prompt (a `user` line) sent without
   * waiting for an answer. Applied at most once per input id, like session.send; the `prompt`
   * event echoed to every client, carrying this `input_id`, is the answer, and only a
   * duplicate or a refusal gets a `session.post_result`.
   */
  'session.post': z.object({ session_id: id, input_id: id, line: EngineInput, trace: TraceContext.optional() }),
  /** gateway -> client: a session.post that was not applied now: a duplicate, or refused with `error`. */
  'session.post_result': z.object({
    session_id: id,
    input_id: id,
    status: z.literal('duplicate').optional(),
    error: RpcErrorObject.optional(),
  }),
  /** gateway -> client: the engine's control_response to this client's own control_request. */
  'session.reply': z.object({ session_id: id, line: z.string() }),
  /**
   * gateway -> client (after fleet.watch): agents, sessions or what waits for someone changed
   * somewhere in the fleet; coalesced (at most one per FLEET_CHANGE_COALESCE_MS). Carries no
   * data: the client lists again what it shows (no one is told of a session they may not see).
   */
  'fleet.changed': z.object({}),
  /** gateway -> client: a session.create of this client is waiting (e.g. for its agent to come back). */
  'session.create_progress': z.object({
    create_id: id.optional(),
    session_id: id,
    agent: z.string(),
    status: z.enum(['waiting_for_agent', 'spawning']),
    message: z.string(),
  }),
} as const;

/**
 * An `agent.input` notification as `JSON.stringify({ jsonrpc, method, params })` writes it,
 * with `lineText` (the line as `JSON.stringify` wrote it when the gateway checked it) put in
 * as it is: the gateway sends one per input and need not serialize the line again.
 */
export function agentInputText(p: Omit<NotificationParams<'agent.input'>, 'line'>, lineText: string): string {
  return (
    `{"jsonrpc":"2.0","method":"agent.input","params":{"session_id":${JSON.stringify(p.session_id)},"seq":${p.seq},"line":${lineText}` +
    `${p.ack === undefined ? '' : `,"ack":${p.ack}`}${p.trace === undefined ? '' : `,"trace":${JSON.stringify(p.trace)}`}}}`
  );
}
/** Every field of agent.input that agentInputText writes: a field added to the schema and not there fails to compile. */
const INPUT_TEXT_FIELDS = ['session_id', 'seq', 'line', 'ack', 'trace'] as const;
const inputTextComplete: Exclude<keyof NotificationParams<'agent.input'>, (typeof INPUT_TEXT_FIELDS)[number]> extends never ? true : never =
  true;
void inputTextComplete;

export type MethodName = keyof typeof Methods;
export type NotificationName = keyof typeof Notifications;
export type ParamsOf<M extends MethodName> = z.input<(typeof Methods)[M]['params']>;
export type ResultOf<M extends MethodName> = z.infer<(typeof Methods)[M]['result']>;
export type NotificationParams<N extends NotificationName> = z.infer<(typeof Notifications)[N]>;
export type BinaryNotificationName = keyof typeof BinaryNotifications;
export type BinaryNotificationParams<N extends BinaryNotificationName> = z.infer<(typeof BinaryNotifications)[N]>;

/** What a create that waits is told: session.create_progress without the create id. */
export type CreateProgress = Omit<NotificationParams<'session.create_progress'>, 'create_id'>;

/** The client requests about one session, applied where the session is held. */
export type SessionCall =
  | 'session.attach'
  | 'session.detach'
  | 'session.send'
  | 'session.set_role'
  | 'session.set_owner'
  | 'session.move'
  | 'session.withdraw_rule'
  | 'session.withdraw_prompt'
  | 'session.rename'
  | 'session.follow'
  | 'session.stop'
  | 'session.audit'
  | 'session.folder'
  | 'session.info';

/** A session call's params: every one names its session (an audit query about one session does too). */
export type SessionCallParams<M extends SessionCall> = ParamsOf<M> & { session_id: string };
