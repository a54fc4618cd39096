import { randomUUID } from 'node:crypto';
import { asTetherError, TetherError } from '../core/errors.js';
import type { PromptPriority, QueuedPrompt, Role, TetherEvent } from '../core/protocol/events.js';
import type { AuditRecord } from '../core/protocol/audit.js';
import type { UsageQuery, UsageResult } from '../core/protocol/usage.js';
import type { NotificationParams, SessionInfo, StopSignal } from '../core/protocol/methods.js';
import type { RpcPeer } from '../core/rpc/peer.js';
import type { FolderResultOf } from '../core/protocol/folder-view.js';
import { readFolder } from './folder-view.js';
import { tetherEvent } from '../core/protocol/events.js';
import { QUEUED_PRIORITY } from '../core/protocol/prompt-priority.js';
import { acrossReconnects, atOnceThenAcrossReconnects } from './across-reconnects.js';
import { PromptPosts } from './prompt-posts.js';
import { asPermissionRequest, proposedSessionRule, type PermissionAnswer, type PermissionRequest } from './permission-policy.js';
import { Wakeup } from '../core/util/wakeup.js';
import { Fifo } from '../core/util/fifo.js';
import type { TraceSpan, Tracer } from '../core/telemetry/tracer.js';

/** Inputs are sent again after a cut while the error says a retry can help (same input id: applied once). */
const RETRY_RETRYABLE = { retry: (e: TetherError) => e.retryable };

/** What a client's input is called in its span: a prompt, an answer to a permission prompt, a control request. */
const INPUT_SPANS: Record<string, string> = {
  user: 'tether.client.prompt',
  control_response: 'tether.client.answer',
  control_request: 'tether.client.control',
};

/** The span of one input this client sends: its ids, kind and size, never its text. */
function inputSpan(tracer: Tracer, sessionId: string, inputId: string, line: Record<string, unknown>): TraceSpan {
  const type = typeof line.type === 'string' ? line.type : '';
  const request = line.type === 'control_request' ? (line.request as { subtype?: unknown } | undefined)?.subtype : undefined;
  return tracer.start(
    INPUT_SPANS[type] ?? 'tether.client.input',
    undefined,
    {
      'tether.session_id': sessionId,
      'tether.input_id': inputId,
      'tether.input.type': INPUT_SPANS[type] ? type : 'other',
      'tether.input.bytes': JSON.stringify(line).length,
      'tether.control.subtype': typeof request === 'string' ? request.slice(0, 64) : undefined,
    },
    'client',
  );
}

/**
 * A decision for one permission prompt. `rememberForSession` (with allow) also grants, for the
 * rest of the session, the rule the engine proposed for this call (its permission_suggestions,
 * destination session), never the whole tool; when the engine proposed none, it grants nothing more.
 */
export type PermissionDecision = PermissionAnswer & { rememberForSession?: boolean };

/** How {@link RemoteSession.send} sends a prompt. */
export interface SendOptions {
  /** Where it goes while a turn runs (default `later`: it waits for the running turn to end). */
  priority?: PromptPriority;
  /** The prompt's uuid (default: a fresh one). */
  uuid?: string;
}

/** A user frame for the engine. */
function userLine(content: string | unknown[], opts: { parentToolUseId?: string | null; uuid?: string }): Record<string, unknown> {
  const line: Record<string, unknown> = {
    type: 'user',
    message: { role: 'user', content },
    parent_tool_use_id: opts.parentToolUseId ?? null,
    session_id: 'default',
  };
  if (opts.uuid) line.uuid = opts.uuid;
  return line;
}

/** The app's permission callback, like the Agent SDK's canUseTool. */
export type CanUseTool = (request: PermissionRequest) => PermissionDecision | Promise<PermissionDecision>;

/** One item of a session's stream as the library hands it out. */
export type SessionItem =
  | { kind: 'engine'; seq: number; line: string; message: Record<string, unknown>; origin: 'engine' | 'gateway' }
  | { kind: 'event'; seq: number; event: TetherEvent }
  | { kind: 'reply'; line: string; message: Record<string, unknown> };

/**
 * An engine item whose `message` is parsed on first access: pipe mode and the SDK drop-in
 * only forward `line`, and a 100 KB line parsed for nobody is the library's largest cost.
 * The agent relays JSON objects only; a line that does not parse reads as `{}`.
 *
 * A class with the getter on its prototype, not an object literal with its own getter (a
 * closure and a context per item): with the literal, 70–78 % of the young generation survived
 * each scavenge at 100 KB frames (the lines, promoted and then freed only by full collections;
 * allocation-site pretenuring of the literal is the likely cause) and the client spent 150–190
 * µs per frame; with this class ~1 % and 80–90 µs (docs/performance-notebook.md, 100 KB frames).
 */
class EngineLineItem {
  readonly kind = 'engine' as const;
  #parsed: Record<string, unknown> | undefined;

  constructor(
    readonly seq: number,
    readonly line: string,
    readonly origin: 'engine' | 'gateway',
  ) {}

  get message(): Record<string, unknown> {
    if (this.#parsed === undefined) {
      try {
        const v: unknown = JSON.parse(this.line);
        this.#parsed = typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
      } catch {
        this.#parsed = {};
      }
    }
    return this.#parsed;
  }
}

function engineItem(seq: number, line: string, origin: 'engine' | 'gateway'): Extract<SessionItem, { kind: 'engine' }> {
  return new EngineLineItem(seq, line, origin);
}

/**
 * A session.frame as the library routes it: an engine line kept as the text the engine wrote
 * (sliced from the frame unparsed), or a gateway event.
 */
export interface IncomingFrame {
  session_id: string;
  seq: number;
  origin: 'engine' | 'gateway';
  line?: string;
  event?: TetherEvent;
}

/** A stop waits for the engine's staged exit and, across a cut, for its agent to come back. */
const STOP_TIMEOUT_MS = 90_000;

/** Items buffered for a reader that is not keeping up, before the iteration fails. */
const MAX_BUFFERED_ITEMS = 100_000;

/** What the session needs from the client that owns it. */
export interface SessionTransport {
  /** The live peer, waiting for a reconnect if the link is down (bounded). */
  peer(): Promise<RpcPeer>;
  /** The live peer when the link is up now (what peer() would resolve with at once), else undefined. */
  livePeer?(): RpcPeer | undefined;
  /** Whether the gateway behind `peer` takes prompts as `session.post` (capability session.post.v1). */
  postsPrompts?(peer: RpcPeer): boolean;
  /** Who the gateway says we are (the token's subject). */
  readonly principal?: string;
  /** The tracer of the client's requests while tracing is on. */
  readonly tracer?: Tracer;
}

/**
 * A session this client created or attached to. Iterate it for the engine's frames and
 * gateway events in seq order (each exactly once, across reconnects); send input with
 * send()/request(). Input ids are chosen here and retried until acknowledged, so a
 * reconnect never applies the same input twice.
 */
export class RemoteSession implements AsyncIterable<SessionItem> {
  role: Role;
  clientId: string;
  info: SessionInfo;
  /** Highest seq delivered to this object so far. */
  lastSeq = 0;
  private readonly items = new Fifo<SessionItem>();
  private readonly wakeup = new Wakeup();
  private ended: TetherError | 'done' | undefined;
  private readonly replies = new Map<string, { resolve: (m: Record<string, unknown>) => void; reject: (e: TetherError) => void }>();
  private nextRequest = 1;
  private permissionHandler: CanUseTool | undefined;
  /** Prompts waiting for the history to be through (bounded by what the history holds). */
  private deferred: PermissionRequest[] = [];
  /** Last seq of the history sent on attach (0 for a session this client created). */
  readonly historyEnd: number;
  /** Prompts sent as session.post, waiting for their echo. */
  private readonly posts = new PromptPosts();
  /** The session's queued prompts, from the last `queued` event. */
  private queue: QueuedPrompt[] = [];

  constructor(
    private readonly transport: SessionTransport,
    attach: { session: SessionInfo; role: Role; client_id: string; next_seq?: number },
    readonly readOnly: boolean,
  ) {
    this.historyEnd = (attach.next_seq ?? 1) - 1;
    this.info = attach.session;
    this.role = attach.role;
    this.clientId = attach.client_id;
  }

  get id(): string {
    return this.info.id;
  }

  /** Called by the client for every session.frame of this session. */
  onFrame(f: IncomingFrame): void {
    if (f.seq !== 0) {
      if (f.seq <= this.lastSeq) return; // replayed after a resume: already delivered
      this.lastSeq = f.seq;
    }
    if (f.event) {
      if (f.event.subtype === 'state') this.info.state = f.event.state;
      if (f.event.subtype === 'queued') this.queue = f.event.prompts;
      if (f.event.subtype === 'worktree') this.info.worktree = f.event.worktree; // created, then removed or kept at the end
      this.posts.onEvent(f.event, this.transport.principal);
      this.enqueue({ kind: 'event', seq: f.seq, event: f.event });
      if (f.event.subtype === 'exited') this.finish('done');
      this.flushDeferred();
      return;
    }
    if (f.line === undefined) return;
    const item = engineItem(f.seq, f.line, f.origin);
    this.enqueue(item);
    // Only control frames matter here; everything else is parsed when (if) a reader looks.
    if (f.line.includes('"control_')) {
      const message = item.message;
      // A prompt from history that someone decided meanwhile is no longer ours to decide.
      if (message.type === 'control_cancel_request') this.deferred = this.deferred.filter((a) => a.requestId !== message.request_id);
      if (f.origin === 'engine' && this.permissionHandler && this.role !== 'viewer') {
        const ask = asPermissionRequest(message);
        if (ask) this.deferred.push(ask);
      }
    }
    this.flushDeferred();
  }

  /**
   * Prompts from history are decided only once the history is through, and only if nobody
   * decided them meanwhile; live ones at once.
   */
  private flushDeferred(): void {
    if (this.lastSeq < this.historyEnd || !this.deferred.length) return;
    const handler = this.permissionHandler;
    for (const ask of this.deferred.splice(0)) if (handler) void this.decide(ask, handler);
  }

  /**
   * Answers every permission prompt (can_use_tool, incl. AskUserQuestion) through `handler`,
   * like the Agent SDK's canUseTool. A decision with `rememberForSession` also grants the rule
   * the engine proposed for that call, for the rest of the session (the engine then asks no
   * more for calls it covers). Prompts still appear in the
   * iteration, so a UI can show them; another controller may answer first (then ours is
   * refused as already decided, which is not an error here).
   */
  setPermissionHandler(handler: CanUseTool | undefined): void {
    this.permissionHandler = handler;
  }

  private async decide(ask: PermissionRequest, handler: CanUseTool): Promise<void> {
    let decision: PermissionDecision;
    try {
      decision = await handler(ask);
    } catch (err) {
      decision = { behavior: 'deny', message: `permission handler failed: ${asTetherError(err).message}` };
    }
    const { rememberForSession, ...answer } = decision;
    // The engine applies the rule itself: later calls it covers are not asked; others still are.
    const rule = rememberForSession && answer.behavior === 'allow' ? proposedSessionRule(ask.raw) : undefined;
    if (rule && answer.behavior === 'allow') answer.updatedPermissions = [...(answer.updatedPermissions ?? []), rule];
    await this.answer(ask.requestId, answer as PermissionAnswer).catch((err) => {
      const e = asTetherError(err);
      if (e.code !== 'FAILED_PRECONDITION' && e.code !== 'NOT_FOUND')
        this.enqueue({
          kind: 'event',
          seq: 0,
          event: tetherEvent({ subtype: 'error', code: e.code, message: `answer to ${ask.toolName} not delivered: ${e.message}` }),
        });
    });
  }

  /** Called by the client for every session.post_result of this session. */
  onPostResult(r: NotificationParams<'session.post_result'>): void {
    this.posts.onResult(r);
  }

  /** Called by the client when `peer`'s connection closed. */
  onLinkLost(peer: RpcPeer): void {
    this.posts.linkLost(peer);
  }

  /** Called by the client for every session.reply of this session. */
  onReply(r: NotificationParams<'session.reply'>): void {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(r.line) as Record<string, unknown>;
    } catch {
      return;
    }
    const id = (message.response as { request_id?: unknown } | undefined)?.request_id;
    const waiter = typeof id === 'string' ? this.replies.get(id) : undefined;
    if (waiter) {
      this.replies.delete(id as string);
      const response = message.response as { subtype?: string; error?: string };
      if (response.subtype === 'error')
        waiter.reject(
          new TetherError('FAILED_PRECONDITION', `engine refused the request: ${response.error ?? 'error'}`, { reply: message }),
        );
      else waiter.resolve(message);
    }
    this.enqueue({ kind: 'reply', line: r.line, message });
  }

  /** Ends iteration (session exited, detached, or the client closed). */
  finish(reason: TetherError | 'done'): void {
    if (this.ended) return;
    this.ended = reason;
    const err = reason === 'done' ? new TetherError('CANCELLED', 'session ended') : reason;
    for (const w of this.replies.values()) w.reject(err);
    this.replies.clear();
    this.posts.failAll(err);
    this.wakeup.wake();
  }

  private enqueue(item: SessionItem): void {
    if (this.ended) return;
    if (this.items.length >= MAX_BUFFERED_ITEMS) {
      this.finish(
        new TetherError(
          'RESOURCE_EXHAUSTED',
          `reader fell ${MAX_BUFFERED_ITEMS} items behind; reattach with fromSeq ${this.lastSeq - this.items.length + 1}`,
        ),
      );
      return;
    }
    this.items.push(item);
    this.wakeup.wake();
  }

  /**
   * Items in order, then the end (or the error that ended the session). Written by hand: an
   * async generator costs about twice as much per item, and this runs once per frame.
   */
  [Symbol.asyncIterator](): AsyncIterableIterator<SessionItem> {
    let finished = false;
    const done = (): Promise<IteratorResult<SessionItem>> => {
      finished = true;
      return Promise.resolve({ done: true, value: undefined });
    };
    const next = (): Promise<IteratorResult<SessionItem>> => {
      if (finished) return done();
      const item = this.items.shift();
      if (item) return Promise.resolve({ done: false, value: item });
      if (this.ended === 'done') return done();
      if (this.ended) {
        finished = true;
        return Promise.reject(this.ended);
      }
      return this.wakeup.wait().then(next);
    };
    return {
      next,
      return: done,
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /**
   * Sends a prompt: `priority` says where it goes when a turn runs (`later` by default: it
   * waits in the queue; `now` steers the running turn, `next` may be folded into it). Resolves
   * with the prompt's uuid, which {@link withdraw} names while it is queued.
   */
  send(text: string, opts?: SendOptions): Promise<{ status: 'applied' | 'duplicate'; uuid: string }>;
  /**
   * Sends one engine input line (user message, control_request, control_response). Retried
   * across reconnects with the same input id until the gateway acknowledges it.
   */
  send(line: Record<string, unknown>, inputId?: string): Promise<'applied' | 'duplicate'>;
  send(what: string | Record<string, unknown>, opts?: string | SendOptions): Promise<unknown> {
    if (typeof what !== 'string') return this.sendLine(what, typeof opts === 'string' ? opts : undefined);
    const o = typeof opts === 'object' ? opts : {};
    const uuid = o.uuid ?? randomUUID();
    const line = userLine(what, { uuid });
    line.priority = o.priority ?? QUEUED_PRIORITY;
    return this.sendLine(line).then((status) => ({ status, uuid }));
  }

  /** The prompts queued in this session, in the order they will run, each with its author (as of the last frame read). */
  queued(): QueuedPrompt[] {
    return this.queue.map((p) => ({ ...p }));
  }

  /**
   * Withdraws a queued prompt (its author, or the session's owner) before it starts. Resolves
   * once the gateway sent the withdrawal; the queue shows it gone once the engine confirms.
   * PERMISSION_DENIED for anyone else, FAILED_PRECONDITION once it started.
   */
  async withdraw(uuid: string): Promise<void> {
    const peer = await this.transport.peer();
    await peer.request('session.withdraw_prompt', { session_id: this.id, uuid });
  }

  /**
   * Renames the session (its owner, or an admin): every member reads `title_changed`, and
   * listings show the new title. PERMISSION_DENIED for anyone else; INVALID_ARGUMENT for an
   * empty title or one over TITLE_MAX_CHARS (core/protocol/inbox.ts).
   */
  async rename(title: string): Promise<void> {
    const peer = await this.transport.peer();
    await peer.request('session.rename', { session_id: this.id, title });
  }

  /**
   * Everyone attached: the attach answer's `info.clients` when it lists them all, else (it
   * lists at most ATTACH_MEMBERS_LISTED; `info.client_count` says how many there are) the
   * whole list asked of the gateway with `session.info`, kept in `info`. Presence events
   * after the answer keep a reader's list current.
   */
  async members(): Promise<SessionInfo['clients']> {
    if ((this.info.client_count ?? 0) <= this.info.clients.length) return this.info.clients;
    const peer = await this.transport.peer();
    const { session } = await peer.request('session.info', { session_id: this.id });
    this.info.clients = session.clients;
    this.info.client_count = session.client_count;
    return session.clients;
  }

  /**
   * Follows the session (`on`), or stops: this person is told of its turns' ends, its ending and
   * its agent's loss by push and their own webhooks, as the owner is, without being attached.
   */
  async follow(on: boolean): Promise<void> {
    const peer = await this.transport.peer();
    await peer.request('session.follow', { session_id: this.id, follow: on });
  }

  /** The connection to send on, once there is one (made once: a prompt's path allocates no more than it must). */
  private readonly nextPeer = (): Promise<RpcPeer> => this.transport.peer();

  private sendLine(line: Record<string, unknown>, inputId: string = randomUUID()): Promise<'applied' | 'duplicate'> {
    const span = this.transport.tracer && inputSpan(this.transport.tracer, this.id, inputId, line);
    const trace = span?.context;
    const call = (peer: RpcPeer): Promise<'applied' | 'duplicate'> =>
      // A prompt's echo is its answer where the gateway allows it: one message less each way.
      // Once the session is over, no echo can come: the request gets the gateway's precise answer.
      line.type === 'user' && !this.ended && this.transport.postsPrompts?.(peer)
        ? this.posts.post(peer, this.id, inputId, line, trace)
        : peer.request('session.send', { session_id: this.id, input_id: inputId, line, trace }).then((r) => r.status);
    const live = this.transport.livePeer?.();
    const sent = live
      ? atOnceThenAcrossReconnects(live, this.nextPeer, call, RETRY_RETRYABLE)
      : acrossReconnects(this.nextPeer, call, RETRY_RETRYABLE);
    if (!span) return sent;
    return sent.then(
      (status) => {
        span.set({ 'tether.input.status': status });
        span.end();
        return status;
      },
      (err: unknown) => {
        span.end(err);
        throw err;
      },
    );
  }

  /**
   * Sends a user prompt, with a uuid of its own (made here unless given): the engine then tells
   * when it takes the prompt up (command_lifecycle), and every member sees those lines as the
   * engine wrote them (the gateway holds back only the lines about uuids it made itself).
   */
  sendUserMessage(
    content: string | unknown[],
    opts: { parentToolUseId?: string | null; uuid?: string } = {},
  ): Promise<'applied' | 'duplicate'> {
    return this.sendLine(userLine(content, { ...opts, uuid: opts.uuid ?? randomUUID() }));
  }

  /** Sends a control_request and resolves with the engine's control_response to it. */
  async request(subtype: string, fields: Record<string, unknown> = {}, timeoutMs = 60_000): Promise<Record<string, unknown>> {
    const requestId = `req_${this.nextRequest++}_${randomUUID().slice(0, 8)}`;
    const answered = new Promise<Record<string, unknown>>((resolve, reject) => {
      this.replies.set(requestId, { resolve, reject });
      const t = setTimeout(() => {
        this.replies.delete(requestId);
        reject(new TetherError('DEADLINE_EXCEEDED', `${subtype} got no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      t.unref();
    });
    try {
      await this.sendLine({ type: 'control_request', request_id: requestId, request: { subtype, ...fields } });
    } catch (err) {
      this.replies.delete(requestId);
      answered.catch(() => {}); // never settles now; the send's own error is the answer
      throw err;
    }
    return answered;
  }

  /** Interrupts the running turn; `clearQueue` also drops every queued prompt (`cancel_queued`), and every member is told how many. */
  interrupt(opts: { clearQueue?: boolean } = {}) {
    return this.request('interrupt', opts.clearQueue ? { cancel_queued: true } : {});
  }
  setModel(model: string | null) {
    return this.request('set_model', { model });
  }
  setPermissionMode(mode: string) {
    return this.request('set_permission_mode', { mode });
  }

  /** MCP servers and their status (`mcp_status`). */
  mcpStatus() {
    return this.request('mcp_status');
  }
  /** Replaces the dynamically added MCP servers (`mcp_set_servers`). */
  setMcpServers(servers: Record<string, unknown>) {
    return this.request('mcp_set_servers', { servers });
  }
  /** Context window usage (`get_context_usage`). */
  contextUsage(detail: 'summary' | 'full' = 'summary') {
    return this.request('get_context_usage', { detail });
  }
  /** Rewinds files to before a user message (`rewind_files`; needs file checkpointing). */
  rewindFiles(userMessageId: string, dryRun = false) {
    return this.request('rewind_files', { user_message_id: userMessageId, dry_run: dryRun });
  }

  /** Answers a permission prompt (can_use_tool) with the engine's own answer shape. */
  answer(
    requestId: string,
    response:
      | { behavior: 'allow'; updatedInput: Record<string, unknown>; updatedPermissions?: unknown[] }
      | { behavior: 'deny'; message: string; interrupt?: boolean },
  ) {
    return this.sendLine({ type: 'control_response', response: { subtype: 'success', request_id: requestId, response } });
  }

  /** Owner only: makes another attached client a controller or a viewer. */
  async setRole(clientId: string, role: 'controller' | 'viewer'): Promise<void> {
    const peer = await this.transport.peer();
    await peer.request('session.set_role', { session_id: this.id, client_id: clientId, role });
  }

  /** Owner only: hands the session to `principal` (a member, or a principal the gateway knows); the caller stays on as a controller. */
  async setOwner(principal: string): Promise<void> {
    const peer = await this.transport.peer();
    await peer.request('session.set_owner', { session_id: this.id, owner: principal });
  }

  /** Withdraws a standing rule of the session (its owner, or who granted it): its calls ask again. */
  async withdrawRule(rule: string): Promise<void> {
    const peer = await this.transport.peer();
    await peer.request('session.withdraw_rule', { session_id: this.id, rule });
  }

  /** The session's audit records, oldest first (its owner or an admin only). */
  async audit(limit?: number): Promise<AuditRecord[]> {
    const peer = await this.transport.peer();
    return (await peer.request('session.audit', { session_id: this.id, limit })).entries;
  }

  /** The session folder's branch, upstream, ahead/behind and changed files with counts (any member may read it, viewers too). */
  async changes(): Promise<FolderResultOf<'status'>> {
    return readFolder(await this.transport.peer(), this.id, { view: 'status' });
  }

  /**
   * The diff of the session's folder (or of `file` in it) against HEAD or `base` (a branch or
   * commit), untracked files as new; past `maxBytes` the text is cut and `cut` says so.
   * `stat`: the files and their counts only.
   */
  async diff(opts: { file?: string; base?: string; stat?: boolean; maxBytes?: number } = {}): Promise<FolderResultOf<'diff'>> {
    const query = { view: 'diff' as const, path: opts.file, base: opts.base, stat: opts.stat, max_bytes: opts.maxBytes };
    return readFolder(await this.transport.peer(), this.id, query);
  }

  /** A file of the session's folder (its text up to `maxBytes`; a binary file named only) or a folder's entries. */
  async readFile(path: string, maxBytes?: number): Promise<FolderResultOf<'file'>> {
    return readFolder(await this.transport.peer(), this.id, { view: 'file', path, max_bytes: maxBytes });
  }

  /** The most recent commits of the session folder's HEAD. */
  async commits(limit?: number): Promise<FolderResultOf<'log'>['commits']> {
    return (await readFolder(await this.transport.peer(), this.id, { view: 'log', limit })).commits;
  }

  /**
   * What this session's turns used, from the gateway's usage ledger: summed by principal unless
   * `by` says otherwise, since `since_ms` when given. The caller sees the turns it started, or
   * all of them when it owns the session or holds the admin scope (`scope` says which).
   */
  async usage(query: Omit<UsageQuery, 'session_id'> = {}): Promise<UsageResult> {
    const peer = await this.transport.peer();
    return peer.request('usage.read', { ...query, session_id: this.id });
  }

  /**
   * Asks the agent to stop the engine: staged (stdin EOF, then signals) by default; `SIGTERM`
   * or `SIGKILL` signal at once, and escalate a stop already in progress. Resolves once it
   * has exited. A stop cut off by a reconnect is asked again (the engine stops once).
   */
  async stop(signal?: StopSignal): Promise<void> {
    const params = { session_id: this.id, ...(signal && signal !== 'eof' ? { signal } : {}) };
    await acrossReconnects(
      () => this.transport.peer(),
      (peer) => peer.request('session.stop', params, { timeoutMs: STOP_TIMEOUT_MS }),
      { withinMs: STOP_TIMEOUT_MS },
    );
  }
}
