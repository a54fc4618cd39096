/**
 * One session the page is attached to: its frames in seq order (each once, across
 * reconnects: after a reconnect it re-attaches from the seq after its last one, as the
 * library does in client/gateway-client.ts), its transcript, and what a controller can do.
 */
import type { Connection } from './connection';
import { readFrame, readReply, type FrameParams, type StreamItem } from './frames';
import { presenceChanges } from '../../../core/protocol/presence.js';
import { TetherError } from '../../../core/errors.js';
import { QUEUED_PRIORITY } from '../../../core/protocol/prompt-priority.js';
import { titleFromPrompt } from '../../../core/protocol/titles.js';
import { SessionMeter } from './session-meter';
import { perAnimationFrame, Store } from './store';
import { Transcript } from './transcript';
import type { FolderQuery, FolderResultOf } from '../../../core/protocol/folder-view.js';

/** How long the page waits for the engine's answer to a request of its own (a model list, the context use). */
const ASK_TIMEOUT_MS = 30_000;

/** A model the engine offers (its list_models answer, cut by the gateway to the policy's list). */
export interface ModelChoice {
  value: string;
  resolvedModel?: string;
  displayName?: string;
  description?: string;
}

/** Frames kept for a session whose create/attach answer has not arrived yet (they come first). */
const MAX_EARLY_FRAMES = 20_000;

export interface SessionInfo {
  id: string;
  created_at: string;
  agent: string;
  owner: string;
  state: string;
  clients: { client_id: string; principal: string; role: string; may_control?: boolean; name?: string }[];
  /** Members in all; an attach answer lists only the earliest few in `clients` (absent: all listed). */
  client_count?: number;
  pending_prompts: number;
  options: { cwd?: string; model?: string; permission_mode?: string };
  /** The agent is away since then (ISO time); absent while it is connected. */
  agent_away_since?: string;
  /** While it is away: prompts queued for it. */
  queued_inputs?: number;
  /** The engine's or the owner's name for it, else its first prompt. */
  title?: string;
  /** The owner's display name from the identity provider, where the gateway knows it. */
  owner_name?: string;
}

/** An image for a prompt, as the engine's content block wants it. */
export interface ImageAttachment {
  mediaType: string;
  /** Base64, no data: prefix. */
  data: string;
  name: string;
}

export interface SessionView {
  role: 'owner' | 'controller' | 'viewer';
  state: string;
  /** Bumped on every change of the transcript. */
  version: number;
  /** Bumped when the header's meter or model list changes (apart from `version`: no transcript moved, so no scroll follows). */
  headVersion: number;
  /** Who is attached now (from presence events); `mayControl` false: their token only lets them watch. */
  present: Map<string, { principal: string; role: string; mayControl?: boolean; name?: string }>;
  /** The session's title (as the gateway keeps it: see gateway/session/session-title.ts); undefined before any. */
  title?: string;
  /** Bumped when an engine tool call that may change files (FILE_TOOLS) finished: the Changes panel reads the folder again. */
  filesVersion: number;
}

/** Tools whose finish may have changed the session's folder. */
const FILE_TOOLS = new Set(['Edit', 'MultiEdit', 'Write', 'NotebookEdit', 'Bash']);

export class OpenSession {
  readonly transcript = new Transcript();
  /** Every stream item, in order (export as JSON). */
  readonly items: StreamItem[] = [];
  readonly view: Store<SessionView>;
  /** The session's cost and context use, for the header. */
  readonly meter = new SessionMeter();
  /** The models a controller may pick; undefined until the engine listed them. */
  models?: ModelChoice[];
  lastSeq = 0;
  /** A turn ended since the context use was last asked for. */
  private contextStale = false;
  /** The last name the engine or the owner gave (title_changed): a first prompt titles only a session nobody named. */
  private named: string | undefined;
  /** A context-use question is out: one at a time (a burst of 2,000 finished turns asks once, not 2,000 times). */
  private contextAsking = false;
  private closed = false;
  private readonly asks = new Map<string, { resolve: (r: unknown) => void; reject: (e: Error) => void }>();
  private clientId = '';
  private nextRequest = 1;
  private readonly offs: (() => void)[] = [];

  private constructor(
    private readonly conn: Connection,
    public info: SessionInfo,
    role: SessionView['role'],
  ) {
    this.view = new Store<SessionView>(
      {
        role,
        state: info.state,
        version: 0,
        headVersion: 0,
        present: new Map(),
        title: info.title,
        filesVersion: 0,
      },
      // Frames arrive one task each: the page renders the session once per animation frame,
      // not once per frame (a live burst of 4,000 took a 2,000-turn page 15 s to draw).
      perAnimationFrame,
    );
  }

  get id(): string {
    return this.info.id;
  }

  get canControl(): boolean {
    return this.view.get().role !== 'viewer';
  }

  /** Starts a session on an agent and opens it as its owner. */
  static async create(conn: Connection, agent: string, options: Record<string, unknown>, engine?: string): Promise<OpenSession> {
    return OpenSession.open(conn, (early) => conn.request('session.create', { agent, engine, options }).then((r) => ({ r, early })));
  }

  /** Attaches to a session (history first, then live), as a controller or read-only. */
  static async attach(conn: Connection, sessionId: string, readOnly: boolean): Promise<OpenSession> {
    return OpenSession.open(conn, (early) =>
      conn.request('session.attach', { session_id: sessionId, read_only: readOnly }).then((r) => ({ r, early })),
    );
  }

  private static async open(
    conn: Connection,
    call: (early: FrameParams[]) => Promise<{ r: any; early: FrameParams[] }>,
  ): Promise<OpenSession> {
    const early: FrameParams[] = [];
    let session: OpenSession | undefined;
    const off = conn.onNotification((method, params) => {
      if (session) return session.onNotification(method, params);
      if (method === 'session.frame' && early.length < MAX_EARLY_FRAMES) early.push(params);
    });
    try {
      const { r } = await call(early);
      session = new OpenSession(conn, r.session, r.role);
      session.clientId = r.client_id;
      // Who is here now; the history's presence events then keep it current.
      session.view.update({ present: presentOf(r.session.clients) });
      if ((r.session.client_count ?? 0) > r.session.clients.length) void session.loadMembers();
      session.offs.push(
        off,
        conn.onReconnect((request) => session!.reattach(request)),
      );
      for (const f of early) if (f.session_id === session.id) session.onFrame(f);
      session.changed();
      session.afterFrames();
      if (session.canControl && session.view.get().state !== 'ended') void session.loadModels();
      return session;
    } catch (err) {
      off();
      throw err;
    }
  }

  private onNotification(method: string, params: any): void {
    if (params?.session_id !== this.id) return;
    if (method === 'session.frame') {
      this.onFrame(params);
      this.changed();
      this.afterFrames();
    } else if (method === 'session.reply') {
      const reply = readReply(params);
      const r = reply?.response as { subtype?: string; error?: string; request_id?: string; response?: unknown } | undefined;
      const ask = typeof r?.request_id === 'string' ? this.asks.get(r.request_id) : undefined;
      if (ask) {
        this.asks.delete(r!.request_id!);
        return r!.subtype === 'success' ? ask.resolve(r!.response) : ask.reject(new Error(r!.error ?? 'the engine refused'));
      }
      if (r?.subtype === 'error') {
        this.transcript.entries.push({ id: -Date.now(), kind: 'note', text: `The engine refused: ${r.error ?? 'error'}`, tone: 'error' });
        this.changed();
      }
    }
  }

  private onFrame(f: FrameParams): void {
    if (f.seq !== 0) {
      if (f.seq <= this.lastSeq) return; // history replayed after a resume: already shown
      this.lastSeq = f.seq;
    }
    const item = readFrame(f);
    if (!item) return;
    this.items.push(item);
    this.transcript.apply(item);
    if (item.kind === 'engine') this.noteFileTools(item.message);
    if (item.kind === 'engine' && item.message.type === 'result') {
      this.meter.onResult(item.message.total_cost_usd);
      this.contextStale = true;
    }
    if (item.kind === 'event') {
      const e = item.event;
      if (e.subtype === 'state') this.view.update({ state: e.state });
      if (e.subtype === 'title_changed') {
        this.named = e.title;
        this.view.update({ title: e.title });
      }
      if (e.subtype === 'prompt' && this.named === undefined && this.view.get().title === undefined)
        this.view.update({ title: titleFromPrompt(e.message) });
      if (e.subtype === 'usage') {
        this.meter.onUsage(e.session_cost_usd);
        this.headChanged();
      }
      if (e.subtype === 'rule_withdrawn') {
        // Off the list for everyone (granted again later, the transcript lists it again).
        const rules = this.transcript.standingRules;
        const at = rules.findIndex((r) => r.rule === e.rule);
        if (at >= 0) rules.splice(at, 1);
        this.transcript.entries.push({
          id: -this.items.length,
          kind: 'note',
          text: `${e.withdrawn_by} withdrew ${e.rule}: it asks again`,
          tone: 'info',
        });
      }
      if (e.subtype === 'presence') {
        const present = new Map(this.view.get().present);
        for (const c of presenceChanges(e)) {
          if (c.action === 'detached') present.delete(c.client_id);
          else
            present.set(c.client_id, {
              principal: c.principal,
              role: c.role,
              mayControl: c.may_control ?? present.get(c.client_id)?.mayControl,
              name: c.name,
            });
          if (c.client_id === this.clientId && c.action === 'role_changed') this.view.update({ role: c.role });
        }
        this.view.update({ present });
      }
    }
  }

  /** Tool calls of FILE_TOOLS still running, by tool_use id: their tool_result bumps `filesVersion`. */
  private readonly fileToolCalls = new Set<string>();

  private noteFileTools(m: Record<string, unknown>): void {
    const content = (m.message as { content?: unknown } | undefined)?.content;
    if (!Array.isArray(content)) return;
    for (const b of content as Record<string, unknown>[]) {
      if (m.type === 'assistant' && b.type === 'tool_use' && FILE_TOOLS.has(String(b.name))) this.fileToolCalls.add(String(b.id));
      if (m.type === 'user' && b.type === 'tool_result' && this.fileToolCalls.delete(String(b.tool_use_id)))
        this.view.update({ filesVersion: this.view.get().filesVersion + 1 });
    }
  }

  /** Reads the session's folder on its agent (branch, changes, a diff, a file): any member, viewers too. */
  folder<Q extends FolderQuery>(query: Q): Promise<FolderResultOf<Q['view']>> {
    return this.conn.request('session.folder', { session_id: this.id, query });
  }

  /** After a turn ended (not on a timer): asks the engine how full its context is, for the meter. */
  private afterFrames(): void {
    if (!this.contextStale || this.contextAsking || this.closed || !this.canControl || this.view.get().state === 'ended') return;
    this.contextStale = false;
    this.contextAsking = true;
    this.ask('get_context_usage')
      .then((r) => this.meter.onContextUsage(r) && this.headChanged())
      .catch(() => {}) // no meter then: the engine did not say
      .finally(() => {
        this.contextAsking = false;
        this.afterFrames(); // turns that ended meanwhile: asked once more
      });
  }

  /** Asks the engine for its models (the gateway leaves only those the policy allows). */
  private async loadModels(): Promise<void> {
    try {
      const r = (await this.ask('list_models')) as { models?: unknown };
      this.models = Array.isArray(r?.models) ? (r.models as ModelChoice[]).filter((m) => typeof m?.value === 'string') : [];
    } catch {
      this.models = [];
    }
    this.headChanged();
  }

  /** A control request whose answer comes back here (bounded: a silent engine rejects it). */
  private ask(subtype: string, fields: Record<string, unknown> = {}): Promise<unknown> {
    const id = `web_${this.nextRequest++}_${crypto.randomUUID().slice(0, 8)}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.asks.delete(id);
        reject(new Error(`the engine did not answer ${subtype} within ${ASK_TIMEOUT_MS / 1000} s`));
      }, ASK_TIMEOUT_MS);
      const settle =
        <T>(f: (v: T) => void) =>
        (v: T) => {
          clearTimeout(timer);
          f(v);
        };
      this.asks.set(id, { resolve: settle(resolve), reject: settle(reject) });
      this.conn.send(this.id, { type: 'control_request', request_id: id, request: { subtype, ...fields } }).catch((err: Error) => {
        this.asks.get(id)?.reject(err);
        this.asks.delete(id);
      });
    });
  }

  private headChanged(): void {
    this.view.update({ headVersion: this.view.get().headVersion + 1 });
  }

  private changed(): void {
    this.view.update({ version: this.view.get().version + 1 });
  }

  /**
   * Everyone attached, asked of the gateway when the attach answer listed only some: its
   * answer is the member list as of its moment (presence frames sent before it are in it, the
   * ones after it apply on top). Without an answer the list stays as the attach gave it.
   */
  private async loadMembers(): Promise<void> {
    try {
      const { session } = await this.conn.request('session.info', { session_id: this.id });
      this.view.update({ present: presentOf(session.clients) });
    } catch {
      // the link dropped or the session went: the presence events still keep the partial list current
    }
  }

  /** After a reconnect: attach again from the seq after the last one shown. */
  private async reattach(request: (m: string, p: unknown) => Promise<any>): Promise<void> {
    const r = await request('session.attach', {
      session_id: this.id,
      from_seq: this.lastSeq + 1,
      read_only: this.view.get().role === 'viewer',
      previous_client_id: this.clientId,
    });
    this.clientId = r.client_id;
    this.info = r.session;
    this.view.update({ role: r.role, state: r.session.state, title: r.session.title });
  }

  /** Renames the session (its owner): every member reads `title_changed`; PERMISSION_DENIED for anyone else. */
  rename(title: string): Promise<void> {
    return this.conn.request('session.rename', { session_id: this.id, title });
  }

  /** Follows the session (`on`) or stops: told of its turns' ends away from the tab (push, own webhooks). */
  follow(on: boolean): Promise<void> {
    return this.conn.request('session.follow', { session_id: this.id, follow: on });
  }

  /** Sends a prompt: text, and images as image content blocks; `steer`: it cuts into the running turn (priority `now`). */
  sendPrompt(text: string, images: ImageAttachment[] = [], steer = false): Promise<void> {
    const content: unknown = images.length
      ? [
          ...(text ? [{ type: 'text', text }] : []),
          ...images.map((i) => ({ type: 'image', source: { type: 'base64', media_type: i.mediaType, data: i.data } })),
        ]
      : text;
    // A uuid (the engine's handle: it can be withdrawn while queued) and where it goes while a turn runs.
    return this.conn.send(this.id, {
      type: 'user',
      message: { role: 'user', content },
      parent_tool_use_id: null,
      session_id: 'default',
      uuid: crypto.randomUUID(),
      priority: steer ? 'now' : QUEUED_PRIORITY,
    });
  }

  /** Withdraws a queued prompt before it starts (its author, or the owner). */
  withdrawPrompt(uuid: string): Promise<void> {
    return this.conn.request('session.withdraw_prompt', { session_id: this.id, uuid });
  }

  /** Answers a permission prompt (first answer wins; a late one is "already decided"). */
  async answer(requestId: string, response: Record<string, unknown>): Promise<void> {
    try {
      await this.conn.send(this.id, { type: 'control_response', response: { subtype: 'success', request_id: requestId, response } });
    } catch (err) {
      if (!(err instanceof TetherError) || (err.code !== 'FAILED_PRECONDITION' && err.code !== 'NOT_FOUND')) throw err;
      // Someone else answered first (or the engine withdrew it): this person is told their answer was not used.
      const p = this.transcript.prompts.get(requestId);
      if (p) {
        p.lateAnswer = true;
        this.changed();
      }
    }
  }

  /** Sends a control request (interrupt, set_model, set_permission_mode); the answer comes as session.reply. */
  control(subtype: string, fields: Record<string, unknown> = {}): Promise<void> {
    return this.conn.send(this.id, {
      type: 'control_request',
      request_id: `web_${this.nextRequest++}_${crypto.randomUUID().slice(0, 8)}`,
      request: { subtype, ...fields },
    });
  }

  /** Owner only: makes another attached client a controller or a viewer. */
  setRole(clientId: string, role: 'controller' | 'viewer'): Promise<void> {
    return this.conn.request('session.set_role', { session_id: this.id, client_id: clientId, role });
  }

  /** Owner only: hands the session to another principal; this client stays on as a controller. */
  setOwner(principal: string): Promise<void> {
    return this.conn.request('session.set_owner', { session_id: this.id, owner: principal });
  }

  /** Withdraws a standing rule (the owner, or who granted it): the engine asks again for what it allowed. */
  withdrawRule(rule: string): Promise<void> {
    return this.conn.request('session.withdraw_rule', { session_id: this.id, rule });
  }

  /** Who this page signed in as (the members list names them so). */
  get principal(): string | undefined {
    return this.view.get().present.get(this.clientId)?.principal;
  }

  /** Stops the engine (the session ends for everyone). */
  stop(): Promise<void> {
    return this.conn.request('session.stop', { session_id: this.id });
  }

  /** This page's own client id (presence lists it like anyone else's). */
  get ownClientId(): string {
    return this.clientId;
  }

  /** Leaves the session (it keeps running). */
  async close(): Promise<void> {
    this.closed = true;
    for (const off of this.offs.splice(0)) off();
    for (const a of this.asks.values()) a.reject(new Error('the session was closed'));
    this.asks.clear();
    await this.conn.request('session.detach', { session_id: this.id }).catch(() => {});
  }
}

/** The view's member map from a `SessionInfo.clients` list. */
function presentOf(clients: SessionInfo['clients']): SessionView['present'] {
  return new Map(clients.map((c) => [c.client_id, { principal: c.principal, role: c.role, mayControl: c.may_control, name: c.name }]));
}
