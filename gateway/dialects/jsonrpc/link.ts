import { randomBytes, randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { Channel } from '../../../core/channel/channel.js';
import { asTetherError, TetherError } from '../../../core/errors.js';
import type { Logger } from '../../../core/logging.js';
import {
  DIALECT_CAPABILITIES,
  DIALECT_CLIENT_REQUESTS,
  DIALECT_NOTIFICATIONS,
  DialectRequests,
  JSONRPC_DIALECT_VERSION,
  PermissionDecision,
  QuestionAnswer,
  type DialectCapability,
  type DialectMethod,
  type DialectNotification,
} from '../../../core/protocol/jsonrpc-dialect.js';
import { PROTOCOL_VERSION } from '../../../core/protocol/version.js';
import type { Role } from '../../../core/protocol/events.js';
import { LATER, RpcEngine } from '../../../core/rpc/engine.js';
import type { RpcId } from '../../../core/rpc/envelope.js';
import { QUEUED_PRIORITY } from '../../../core/protocol/prompt-priority.js';
import type { GatewayMetrics } from '../../metrics.js';
import type { Principal } from '../../door/principal.js';
import { checkControlAudited } from '../../policy/policy-gate.js';
import type { SessionDirectory } from '../../directory/session-directory.js';
import { requireControlScope } from '../../session/session.js';
import type { Member, Session } from '../../session/session.js';
import { sessionsPage } from '../../directory/session-pages.js';
import { readSessionFolder } from '../../directory/session-folder.js';
import { cutOf } from '../../../core/channel/channel.js';
import { controlResponse, permissionAnswer, questionAnswer, riskLevel } from './answers.js';
import { translateFrame, type DialectEvent, type EngineInfo, type TranslatedFrame } from './translate.js';
import { frameBuffer, type FrameBytes } from '../../../core/wire/session-frame.js';

type Obj = Record<string, unknown>;
type Params<M extends DialectMethod> = z.infer<(typeof DialectRequests)[M]>;
type PermissionEvent = Extract<DialectEvent, { kind: 'permission' }>;
/** How the client answered one of our requests: a result, or its error. */
type ClientReply = { result?: unknown; error?: Error };

const NO_ENGINE: EngineInfo = { model: null, tools: [], mcp_servers: [] };
/** Message ids remembered as streamed, per session, before the oldest is forgotten. */
const MAX_STREAMED_IDS = 64;

/** One session as this client sees it. */
interface SessionView {
  session: Session;
  /** The message whose tokens are streaming (message_start's id). */
  messageId: string;
  /** Messages whose text came as tokens: their completed text blocks are not sent again. */
  streamed: Set<string>;
  /** This client's user_message requests waiting for their turn to end, by the uuid stamped on the prompt. */
  turns: Map<string, RpcId>;
  /** Engine permission request id → the id of our request to the client. */
  prompts: Map<string, string>;
  /** True while history is replayed on attach: prompts are held until we know they are still open. */
  replaying: boolean;
  held: Map<string, PermissionEvent>;
  /** History the attach asked for that the gateway no longer holds. */
  gap?: { from_seq: number; to_seq: number };
}

/** One of the client's requests waiting for the engine's control_response. */
interface PendingControl {
  id: RpcId;
  /** The client's method (its name in a too-large answer). */
  method: string;
  result: (response: Obj) => unknown;
}

/**
 * A client edge for the JSON-RPC dialect (docs/jsonrpc-dialect.md): a session Member that
 * turns session frames into the dialect's notifications and permission requests, and the
 * dialect's requests into the same Session calls the native client link makes (roles,
 * first-answer-wins, audit and withdrawal all stay the session's). Speaks raw JSON-RPC 2.0
 * over its channel: one message per text frame.
 */
export class JsonRpcDialectLink implements Member {
  readonly clientId = `c-${randomBytes(6).toString('hex')}`;
  private caps = new Set<DialectCapability>();
  private initialized = false;
  private readonly views = new Map<string, SessionView>();
  private readonly controls = new Map<string, PendingControl>();
  /** JSON-RPC over the channel: our requests to the client are "g-N" and wait as long as the prompt is open. */
  private readonly rpc: RpcEngine<typeof DialectRequests>;
  private nextId = 1;
  /** The session frame and event being applied: notifications carry its seq, and share its wire text. */
  private current: { frame: TranslatedFrame; index: number } | undefined;

  constructor(
    private readonly channel: Channel,
    private readonly p: Principal,
    private readonly dir: SessionDirectory,
    private readonly log: Logger,
    opts: { slowClientBytes: number; initTimeoutMs: number; metrics?: GatewayMetrics },
  ) {
    this.rpc = new RpcEngine(channel, {
      methods: DialectRequests,
      unavailableHint: 'send initialize first',
      idPrefix: 'g-',
      requestTimeoutMs: 0,
      maxBufferedBytes: opts.slowClientBytes,
      onSlowConsumer: () => opts.metrics?.slowClientCut(this.transport),
      onPosted: (text) => opts.metrics?.relayed('to_client', Buffer.byteLength(text)),
      logger: log.child({ client: this.clientId }),
    });
    this.rpc.handle('initialize', (params) => this.initialize(params));
    dir.addClient(this.clientId, p);
    opts.metrics?.clientConnected(this.transport);
    const timer = setTimeout(() => {
      if (!this.initialized) channel.close('DEADLINE_EXCEEDED', `no initialize within ${opts.initTimeoutMs} ms`);
    }, opts.initTimeoutMs);
    void channel.closed.then((info) => {
      clearTimeout(timer);
      opts.metrics?.clientDisconnected(this.transport);
      dir.removeClient(this.clientId);
      for (const v of this.views.values()) v.session.detach(this.clientId, cutOf(info));
      this.views.clear();
      this.controls.clear();
      this.rpc.end(info.reason);
    });
    void this.read();
  }

  get principal(): string {
    return this.p.sub;
  }

  get transport(): string {
    return this.channel.transport;
  }

  // ---- from the session ---------------------------------------------------------------

  sendFrame(frame: FrameBytes): void {
    if (this.channel.isClosed) return;
    const t = translateFrame(frameBuffer(frame));
    const view = this.views.get(t.session_id);
    if (!view) return;
    try {
      t.events.forEach((e, index) => {
        this.current = { frame: t, index };
        this.apply(view, e);
      });
    } finally {
      this.current = undefined;
    }
  }

  sendReply(_sessionId: string, line: string): void {
    let reply: { response?: { request_id?: unknown; subtype?: unknown; response?: unknown; error?: unknown } };
    try {
      reply = JSON.parse(line) as typeof reply;
    } catch {
      return;
    }
    const r = reply.response;
    const pending = typeof r?.request_id === 'string' ? this.controls.get(r.request_id) : undefined;
    if (!r || !pending) return;
    this.controls.delete(r.request_id as string);
    if (r.subtype === 'success') this.rpc.respond(pending.id, pending.method, pending.result(isObj(r.response) ? r.response : {}));
    else this.rpc.fail(pending.id, new TetherError('FAILED_PRECONDITION', `the engine refused: ${String(r.error ?? 'unknown error')}`));
  }

  private apply(view: SessionView, e: DialectEvent): void {
    const sid = view.session.id;
    switch (e.kind) {
      case 'engine':
        view.session.engineInfo = { model: e.model, tools: e.tools, mcp_servers: e.mcp_servers };
        return;
      case 'message_start':
        view.messageId = e.message_id;
        return;
      case 'token': {
        const id = e.message_id ?? view.messageId; // the engine names the message on each delta; older ones only at its start
        remember(view.streamed, id);
        return this.notify('assistant_token', { session_id: sid, token: e.token, message_id: id }, e.message_id !== undefined);
      }
      case 'assistant_text':
        if (view.streamed.has(e.message_id)) return; // already sent as tokens
        return this.notify('assistant_token', { session_id: sid, token: e.text, message_id: e.message_id }, true);
      case 'tool_use_start':
        return this.notify('tool_use_start', { session_id: sid, name: e.name, input: e.input, tool_use_id: e.tool_use_id }, true);
      case 'tool_result':
        return this.notify('tool_result', { session_id: sid, tool_use_id: e.tool_use_id, content: e.content, is_error: e.is_error }, true);
      case 'turn_complete': {
        this.notify('turn_complete', { session_id: sid, stop_reason: e.stop_reason }, true);
        for (const uuid of e.user_message_uuids) {
          const mine = view.turns.get(uuid);
          if (mine === undefined) continue;
          view.turns.delete(uuid);
          this.rpc.respond(mine, 'user_message', { status: e.status, usage: e.usage });
        }
        return;
      }
      case 'permission':
        if (view.replaying) view.held.set(e.request_id, e);
        else this.raise(view, e);
        return;
      case 'withdrawn': {
        view.held.delete(e.request_id);
        const ours = view.prompts.get(e.request_id);
        if (ours === undefined) return;
        view.prompts.delete(e.request_id);
        this.rpc.cancel(ours);
        return this.notify('permission_withdrawn', { session_id: sid, id: ours });
      }
      case 'progress':
        return this.notify('progress', { session_id: sid, ...e.progress }, true);
      case 'presence':
        return this.notify(
          'presence',
          { session_id: sid, action: e.action, principal: e.principal, client_id: e.client_id, role: e.role },
          true,
        );
      case 'gap':
        view.gap = { from_seq: e.from_seq, to_seq: e.to_seq };
        return;
      case 'refused': {
        const mine = view.turns.get(e.uuid);
        if (mine === undefined) return;
        view.turns.delete(e.uuid);
        return this.rpc.fail(mine, new TetherError('PERMISSION_DENIED', e.message));
      }
      case 'queued': {
        const prompts = e.prompts.map((q) => ({
          uuid: q.uuid,
          principal: q.principal,
          priority: q.priority,
          content: (q.message as { content?: unknown } | undefined)?.content,
          ...(q.withdrawing ? { withdrawing: q.withdrawing } : {}),
        }));
        this.notify('queued', { session_id: sid, prompts, change: e.change }, true);
        // A prompt withdrawn or cleared before it ran: no turn will answer its user_message.
        if (e.change.action === 'withdrawn' || e.change.action === 'cleared') {
          for (const uuid of e.change.uuids) {
            const mine = view.turns.get(uuid);
            if (mine === undefined) continue;
            view.turns.delete(uuid);
            this.rpc.respond(mine, 'user_message', { status: 'withdrawn', usage: { input_tokens: 0, output_tokens: 0 } });
          }
        }
        return;
      }
      case 'state':
        this.notify('session_state', { session_id: sid, state: e.state, ...(e.reason ? { reason: e.reason } : {}) }, true);
        if (e.state === 'ended')
          for (const id of view.turns.values())
            this.rpc.respond(id, 'user_message', { status: 'error', usage: { input_tokens: 0, output_tokens: 0 } });
        if (e.state === 'ended') view.turns.clear();
        return;
    }
  }

  /** Asks this client about an engine permission request (a `scope: "session"` allow becomes the engine's own session rule). */
  private raise(view: SessionView, e: PermissionEvent): void {
    const role = view.session.roleOf(this.clientId);
    if (role === undefined || role === 'viewer') return;
    const sid = view.session.id;
    if (e.tool === 'AskUserQuestion') {
      this.ask(view, e, 'user_question', { session_id: sid, tool_use_id: e.tool_use_id, questions: e.input.questions ?? [] }, (reply) => {
        const a = reply.result !== undefined ? QuestionAnswer.safeParse(reply.result) : undefined;
        return questionAnswer(e.input, a?.success ? a.data : undefined);
      });
      return;
    }
    const params = {
      session_id: sid,
      tool: e.tool,
      input: e.input,
      risk_level: riskLevel(e.tool),
      tool_use_id: e.tool_use_id,
      description: e.description,
    };
    this.ask(view, e, 'permission_request', params, (reply) => {
      const d = PermissionDecision.safeParse(reply.result);
      if (!d.success)
        return {
          behavior: 'deny',
          message: reply.error ? `The client could not answer: ${reply.error.message}` : 'The client sent no valid decision.',
        };
      return permissionAnswer(e.tool, e.input, d.data, e.suggestions);
    });
  }

  /** Sends the client a request for one engine prompt; its reply is turned into the engine's answer. */
  private ask(
    view: SessionView,
    e: PermissionEvent,
    method: keyof typeof DIALECT_CLIENT_REQUESTS,
    params: Obj,
    toAnswer: (reply: ClientReply) => Obj,
  ): void {
    if (!this.caps.has(DIALECT_CLIENT_REQUESTS[method])) return; // left to clients that asked for it
    const { id, reply } = this.rpc.call(method, params);
    view.prompts.set(e.request_id, String(id));
    void reply
      .then(
        (result): ClientReply => ({ result }),
        (error: Error): ClientReply => ({ error }),
      )
      .then((r) => {
        // Withdrawn meanwhile (cancelled), or this client left: its prompt stays the session's, unanswered by it.
        if (this.channel.isClosed || view.prompts.get(e.request_id) !== String(id)) return;
        view.prompts.delete(e.request_id);
        this.answer(view, e.request_id, toAnswer(r));
      });
  }

  /** Answers an engine prompt through the session: audited, first answer wins, a late one is dropped. */
  private answer(view: SessionView, requestId: string, response: Obj): void {
    try {
      view.session.input(this.clientId, `answer-${requestId}`, controlResponse(requestId, response));
    } catch (err) {
      this.log.debug({ requestId, err: asTetherError(err).message }, 'permission answer not applied');
    }
  }

  // ---- from the client ----------------------------------------------------------------

  private async read(): Promise<void> {
    for await (const frame of this.channel) {
      if (typeof frame === 'string') this.rpc.receive(frame);
      else this.rpc.refuse('this dialect is JSON text, one message per frame');
    }
  }

  /** The dialect's requests past initialize, served once the client said initialize. */
  private serve(): void {
    for (const method of Object.keys(DialectRequests) as DialectMethod[]) {
      if (method !== 'initialize') this.rpc.handle(method, (params, id) => this.handle(method, params, id)); // initialize is served from the start
    }
  }

  private handle(method: Exclude<DialectMethod, 'initialize'>, params: unknown, id: RpcId): unknown {
    switch (method) {
      case 'session_create':
        return this.create(params as Params<'session_create'>);
      case 'session_attach':
        return this.attachTo(params as Params<'session_attach'>);
      case 'session_list': {
        const page = sessionsPage(this.dir.listSessions(this.p), params as Params<'session_list'>);
        const sessions = page.sessions.map((s) => ({
          session_id: s.id,
          agent: s.agent,
          owner: s.owner,
          state: s.state,
          created_at: s.created_at,
          clients: s.clients.length,
          pending_prompts: s.pending_prompts,
          ...(s.title === undefined ? {} : { title: s.title }),
        }));
        return page.next_cursor === undefined ? { sessions } : { sessions, next_cursor: page.next_cursor };
      }
      case 'session_rename': {
        const { session_id, title } = params as Params<'session_rename'>;
        requireControlScope(this.p, 'rename sessions');
        this.dir.visibleHere(this.p, session_id).rename(this.p, title);
        return {};
      }
      case 'session_folder': {
        const { session_id, query } = params as Params<'session_folder'>;
        return readSessionFolder(this.dir, this.dir.visibleHere(this.p, session_id), query);
      }
      case 'user_message':
        return this.userMessage(params as Params<'user_message'>, id);
      case 'interrupt': {
        const { session_id, clear_queue } = params as Params<'interrupt'>;
        return this.control(session_id, id, { subtype: 'interrupt', ...(clear_queue ? { cancel_queued: true } : {}) }, () => ({}));
      }
      case 'withdraw': {
        const { session_id, uuid } = params as Params<'withdraw'>;
        this.viewOf(session_id).session.withdrawPrompt(this.clientId, uuid);
        return {};
      }
      case 'set_model': {
        const { session_id, model } = params as Params<'set_model'>;
        return this.control(session_id, id, { subtype: 'set_model', model }, (r) => ({
          model: typeof r.model === 'string' ? r.model : model,
        }));
      }
      case 'set_permission_mode': {
        const { session_id, mode } = params as Params<'set_permission_mode'>;
        return this.control(session_id, id, { subtype: 'set_permission_mode', mode }, (r) => ({
          mode: typeof r.mode === 'string' ? r.mode : mode,
        }));
      }
    }
  }

  private initialize(params: Params<'initialize'>): Obj {
    const major = params.protocol_version.split('.')[0];
    if (major !== JSONRPC_DIALECT_VERSION.split('.')[0]) {
      throw new TetherError(
        'INVALID_ARGUMENT',
        `protocol_version ${params.protocol_version} is not supported: this gateway speaks ${JSONRPC_DIALECT_VERSION}`,
      );
    }
    this.caps = new Set(params.capabilities.filter((c): c is DialectCapability => (DIALECT_CAPABILITIES as readonly string[]).includes(c)));
    if (!this.initialized) this.serve();
    this.initialized = true;
    const session = params.session_id === undefined ? undefined : this.dir.visible(this.p, params.session_id);
    return {
      protocol_version: JSONRPC_DIALECT_VERSION,
      gateway_protocol_version: PROTOCOL_VERSION,
      capabilities: [...this.caps],
      principal: this.p.sub,
      client_id: this.clientId,
      ...((session ? session.engineInfo : this.latestEngine()) ?? NO_ENGINE),
    };
  }

  /** The engine of the newest session this client may see that reported one. */
  private latestEngine(): EngineInfo | undefined {
    let found: EngineInfo | undefined;
    for (const s of this.dir.listSessions(this.p)) found = this.dir.visible(this.p, s.id).engineInfo ?? found;
    return found;
  }

  private async create(params: Params<'session_create'>): Promise<Obj> {
    if (!this.p.canCreate) throw new TetherError('PERMISSION_DENIED', 'this token may not create sessions');
    const { agent, cwd, model, permission_mode, worktree } = params;
    // Partial messages on: tokens stream as the model writes them.
    const session = await this.dir.create(
      this.p,
      agent,
      undefined,
      { cwd, model, permission_mode, include_partial_messages: true, ...(worktree === undefined ? {} : { worktree }) },
      randomUUID(),
    );
    if (this.channel.isClosed) {
      // Gone before the answer: nobody can ever learn of this session, so its engine is not left running.
      void session.stop(undefined, 'its creator left before the answer').catch(() => {});
      throw new TetherError('UNAVAILABLE', 'connection closed');
    }
    this.attach(session, session.roles.roleFor(this.p));
    const made = session.info().worktree;
    return { session_id: session.id, ...(made ? { worktree: made } : {}) };
  }

  private attachTo(params: Params<'session_attach'>): Obj {
    const session = this.dir.visibleHere(this.p, params.session_id); // in a cluster: only sessions held here
    const role = session.roles.roleFor(this.p); // the gateway's decision: scope, owner, the owner's decisions
    const { view, nextSeq } = this.attach(session, role, params.from_seq);
    return {
      session_id: session.id,
      role,
      next_seq: nextSeq,
      ...(view.gap ? { gap: view.gap } : {}),
      ...(session.engineInfo ?? NO_ENGINE),
    };
  }

  /** Attaches with a fresh view; prompts replayed from history are raised only if still open afterwards. */
  private attach(session: Session, role: Role, fromSeq?: number): { view: SessionView; nextSeq: number } {
    if (this.channel.isClosed) throw new TetherError('UNAVAILABLE', 'connection closed'); // its cleanup has run: never attach it
    const view: SessionView = {
      session,
      messageId: '',
      streamed: new Set(),
      turns: new Map(),
      prompts: new Map(),
      replaying: true,
      held: new Map(),
    };
    const before = this.views.get(session.id);
    this.views.set(session.id, view);
    let next: number;
    try {
      next = session.attach(this, role, fromSeq);
    } catch (err) {
      if (before) this.views.set(session.id, before);
      else this.views.delete(session.id);
      throw err;
    }
    view.replaying = false;
    for (const e of view.held.values()) this.raise(view, e);
    view.held.clear();
    return { view, nextSeq: next };
  }

  private userMessage(params: Params<'user_message'>, id: RpcId): typeof LATER {
    const view = this.viewOf(params.session_id);
    // The uuid comes back in the result's user_message_uuids: that result ends this request's turn.
    const uuid = params.uuid ?? randomUUID();
    const line = {
      type: 'user',
      message: { role: 'user', content: params.content },
      parent_tool_use_id: null,
      session_id: 'default',
      uuid,
      priority: params.priority ?? QUEUED_PRIORITY,
    };
    if (view.session.input(this.clientId, uuid, line) === 'duplicate')
      throw new TetherError('INVALID_ARGUMENT', `uuid ${uuid} was sent before: each user_message needs a fresh one`);
    view.turns.set(uuid, id);
    return LATER;
  }

  /** Sends a control request to the engine; the client's request is answered with the engine's reply. */
  private control(sessionId: string, id: RpcId, request: Obj, result: PendingControl['result']): typeof LATER {
    const view = this.viewOf(sessionId);
    const requestId = `dialect-${this.nextId++}`;
    this.controls.set(requestId, { id, method: request.subtype as string, result });
    const line = { type: 'control_request', request_id: requestId, request };
    try {
      // The same policy gate as native clients: a mode or model above the policy never reaches the engine.
      checkControlAudited(this.dir, view.session, this.p, this.clientId, line, view.session.roleOf(this.clientId));
      view.session.input(this.clientId, randomUUID(), line);
    } catch (err) {
      this.controls.delete(requestId);
      throw err;
    }
    return LATER;
  }

  /** The view of an attached session this client may drive. */
  private viewOf(sessionId: string): SessionView {
    this.dir.visible(this.p, sessionId); // NOT_FOUND for sessions this principal may not see
    requireControlScope(this.p, 'control sessions');
    const view = this.views.get(sessionId);
    if (!view) throw new TetherError('FAILED_PRECONDITION', `not attached to session ${sessionId}: session_attach first`);
    return view;
  }

  // ---- to the client ------------------------------------------------------------------

  /**
   * Sends a notification only when the client negotiated its capability (DIALECT_NOTIFICATIONS).
   * `shared`: its params depend only on the frame's event, so every dialect client sends the same
   * text, built once per frame.
   */
  private notify(method: DialectNotification, params: Obj, shared = false): void {
    const feature = DIALECT_NOTIFICATIONS[method];
    if (feature !== null && !this.caps.has(feature)) return;
    const at = this.current;
    const build = () => JSON.stringify({ jsonrpc: '2.0', method, params: at?.frame.seq ? { ...params, seq: at.frame.seq } : params });
    this.rpc.post(shared && at ? (at.frame.wire[at.index] ??= build()) : build());
  }
}

function remember(ids: Set<string>, id: string): void {
  if (ids.has(id)) return;
  ids.add(id);
  if (ids.size > MAX_STREAMED_IDS) ids.delete(ids.values().next().value as string);
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
