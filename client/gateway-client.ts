import { randomUUID } from 'node:crypto';
import { asTetherError, TetherError } from '../core/errors.js';
import { Link, type LinkStatus } from '../core/link/link.js';
import { standardDialers, type DialOptions, type Dialers } from '../core/link/dial.js';
import type { GatewayTargets } from '../core/link/gateway-urls.js';
import { CLIENT_CREATE_WAIT_MS } from '../core/timeouts.js';
import { silentLogger, type Logger } from '../core/logging.js';
import { SESSIONS_PAGE_MAX, type AgentInfo, type CreateProgress, type SessionInfo } from '../core/protocol/methods.js';
import { EngineFrameReader } from '../core/wire/session-frame.js';
import type { InboxItem } from '../core/protocol/inbox.js';
import type { EngineKind, SessionOptions } from '../core/protocol/session-options.js';
import { CAPABILITIES, PROTOCOL_VERSION } from '../core/protocol/version.js';
import type { RpcPeer } from '../core/rpc/peer.js';
import type { BackoffPolicy } from '../core/util/backoff.js';
import type { HeartbeatOptions } from '../core/link/heartbeat.js';
import type { TokenSource } from '../core/link/token-renewal.js';
import { RemoteSession, type CanUseTool, type IncomingFrame } from './remote-session.js';
import { acrossReconnects } from './across-reconnects.js';
import type { Telemetry, Tracer } from '../core/telemetry/tracer.js';

export interface ConnectOptions {
  /**
   * ws://, wss://, grpc:// or grpcs:// URL of the gateway, or several (a list, or commas):
   * gateways of one cluster. The first connect tries each in turn; after a drop the client
   * reconnects to the next one and resumes every session from its last seq.
   */
  gateway: GatewayTargets;
  token?: string;
  logger?: Logger;
  dial?: DialOptions;
  /** The transports it may dial; default: a new standardDialers() (ws, wss, grpc, grpcs). */
  dialers?: Dialers;
  /** Keep reconnecting after a drop (default true). The first connect fails fast either way. */
  reconnect?: boolean;
  /** How long calls wait for a reconnect before failing with UNAVAILABLE (default 30 s). */
  reconnectWaitMs?: number;
  software?: string;
  onStatus?: (status: LinkStatus) => void;
  /** Reconnect backoff (default: start 0.5 s, ×1.6, ±20 %, cap 30 s). */
  backoff?: BackoffPolicy;
  /** Liveness pings (default every 15 s, dead after 10 s without an answer). */
  heartbeat?: HeartbeatOptions;
  /**
   * A way to get a fresh token (read a file, mint one) instead of `token`: asked on every
   * (re)connect and before the token expires, so the connection renews itself (auth.renew)
   * instead of being closed with UNAUTHENTICATED at its token's expiry.
   */
  tokenSource?: TokenSource;
  /**
   * Tracing of this client's requests (create, attach, prompts, answers), from
   * `startTelemetry('tether-client')` (core/telemetry/telemetry.ts); its spans are flushed when
   * the client closes. Default: none (no tracing).
   */
  telemetry?: Telemetry;
}

/** A create may wait for its agent to come back and for the engine to start, across reconnects (core/timeouts.ts). */
const CREATE_TIMEOUT_MS = CLIENT_CREATE_WAIT_MS;

/** What the client offers in its hello: only what it reads back in the gateway's answer. */
export const CLIENT_CAPABILITIES: readonly string[] = [CAPABILITIES.sessionPost];

/** Frames for sessions whose create/attach answer has not arrived yet (they come first). */
const MAX_EARLY_FRAMES = 10_000;

/**
 * A client of the gateway: list agents and sessions, create or attach to sessions. It
 * reconnects by itself and re-attaches every open session from its last seq, so iteration
 * continues with nothing lost or repeated. Silent unless given a logger.
 */
export class GatewayClient {
  private readonly link: Link;
  private readonly sessions = new Map<string, RemoteSession>();
  private readonly early = new Map<string, IncomingFrame[]>();
  /** Progress listeners of creates in flight, by create id. */
  private readonly progress = new Map<string, (p: CreateProgress) => void>();
  private peerWaiters: ((p: RpcPeer | TetherError) => void)[] = [];
  private closed = false;
  private resuming = false;
  /** Who the gateway says we are (the token's subject), from the last hello. */
  principal = '';
  /** The tracer of this client's requests while tracing is on. */
  readonly tracer: Tracer | undefined;
  /** Connections whose gateway takes prompts as session.post. */
  private readonly posting = new WeakSet<RpcPeer>();
  private readonly log: Logger;
  /** Who watches the fleet (watchFleet): told of each `fleet.changed`, and after each reconnect. */
  private readonly fleetWatchers = new Set<() => void>();

  private constructor(private readonly opts: ConnectOptions) {
    this.log = opts.logger ?? silentLogger;
    this.tracer = opts.telemetry?.tracer;
    this.link = new Link({
      url: opts.gateway,
      dialers: opts.dialers ?? standardDialers(),
      dial: { ...opts.dial, token: opts.token },
      logger: this.log,
      failFast: true,
      backoff: opts.backoff,
      heartbeat: opts.heartbeat,
      tokenSource: opts.tokenSource,
      hello: () => ({
        protocol_version: PROTOCOL_VERSION,
        role: 'client',
        capabilities: [...CLIENT_CAPABILITIES],
        software: opts.software ?? 'tether-client',
      }),
      setup: (peer) => this.setup(peer),
      onConnected: (peer, hello) => {
        this.principal = hello.principal;
        if (hello.capabilities.includes(CAPABILITIES.sessionPost)) this.posting.add(peer);
        if (this.fleetWatchers.size) void this.watchOn(peer);
        return this.resume(peer);
      },
      onStatus: (s) => {
        if (s.state === 'closed') this.failAll(s.error ?? new TetherError('CANCELLED', 'client closed'));
        if (s.state === 'down' && opts.reconnect === false) void this.link.close();
        opts.onStatus?.(s);
      },
    });
  }

  /** Connects and says hello; rejects with a TetherError if the gateway cannot be reached. */
  static async connect(opts: ConnectOptions): Promise<GatewayClient> {
    const client = new GatewayClient(opts);
    await client.link.start();
    return client;
  }

  postsPrompts(peer: RpcPeer): boolean {
    return this.posting.has(peer);
  }

  /** The live peer when the link is up now (not down, not resuming its sessions), else undefined. */
  livePeer(): RpcPeer | undefined {
    const p = this.link.peer;
    return p && !p.channel.isClosed && !this.resuming ? p : undefined;
  }

  /** The live peer; waits (bounded) for a reconnect when the link is down. */
  peer(): Promise<RpcPeer> {
    const p = this.livePeer();
    if (p) return Promise.resolve(p);
    if (this.closed) return Promise.reject(new TetherError('CANCELLED', 'client closed'));
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new TetherError('UNAVAILABLE', 'gateway unreachable')), this.opts.reconnectWaitMs ?? 30_000);
      this.peerWaiters.push((r) => {
        clearTimeout(t);
        if (r instanceof TetherError) reject(r);
        else resolve(r);
      });
    });
  }

  async listAgents(): Promise<AgentInfo[]> {
    return (await (await this.peer()).request('agents.list', {})).agents;
  }

  /**
   * Every session this token may see, fetched a page at a time (ordered by id). Each carries
   * only cwd, model and permission_mode of its options: {@link getSession} has them all.
   */
  async listSessions(): Promise<SessionInfo[]> {
    const all: SessionInfo[] = [];
    let cursor: string | undefined;
    do {
      const page = await (await this.peer()).request('sessions.list', { limit: SESSIONS_PAGE_MAX, cursor });
      all.push(...page.sessions);
      if (page.next_cursor !== undefined && page.next_cursor === cursor)
        throw new TetherError('INTERNAL', 'sessions.list returned the same page twice');
      cursor = page.next_cursor;
    } while (cursor !== undefined);
    return all;
  }

  /** What waits for this principal across the fleet, newest first (prompts they may answer, their sessions that ended or lost their agent). */
  async inbox(): Promise<InboxItem[]> {
    return (await (await this.peer()).request('inbox.list', {})).items;
  }

  /**
   * Calls `changed` whenever agents, sessions or what waits for someone change anywhere in the
   * fleet (the gateway's `fleet.changed`, coalesced), and after every reconnect (what changed
   * meanwhile is not told otherwise): the caller lists again. Resolves once the gateway
   * watches; the returned function stops the calls (the gateway stops telling at disconnect).
   */
  async watchFleet(changed: () => void): Promise<() => void> {
    const w = () => changed();
    this.fleetWatchers.add(w);
    if (this.fleetWatchers.size === 1) await (await this.peer()).request('fleet.watch', {});
    return () => this.fleetWatchers.delete(w);
  }

  /** A connection came up while someone watches: the gateway is asked again, then the watchers resync. */
  private async watchOn(peer: RpcPeer): Promise<void> {
    try {
      await peer.request('fleet.watch', {});
    } catch (err) {
      this.log.warn({ err: String(err) }, 'fleet.watch failed; the next reconnect asks again');
      return;
    }
    for (const w of this.fleetWatchers) w();
  }

  /** One session's details, its options whole (NOT_FOUND for a session this token may not see). */
  async getSession(sessionId: string): Promise<SessionInfo> {
    return (await (await this.peer()).request('session.info', { session_id: sessionId })).session;
  }

  /**
   * Starts a session on an agent; this client becomes its owner. Idempotent under `createId`
   * (default: a fresh one per call): a create cut off by a reconnect is sent again with the
   * same id and gets the same session, never a second engine. `onProgress` hears when the
   * gateway waits (e.g. for the agent's link to come back).
   */
  async createSession(args: {
    agent: string;
    engine?: EngineKind;
    options?: SessionOptions;
    canUseTool?: CanUseTool;
    createId?: string;
    onProgress?: (progress: CreateProgress) => void;
  }): Promise<RemoteSession> {
    const createId = args.createId ?? randomUUID();
    const span = this.tracer?.start(
      'tether.client.create',
      undefined,
      { 'tether.agent': args.agent, 'tether.create_id': createId },
      'client',
    );
    const params = { agent: args.agent, engine: args.engine, options: args.options ?? {}, create_id: createId, trace: span?.context };
    if (args.onProgress) this.progress.set(createId, args.onProgress);
    try {
      const r = await acrossReconnects(
        () => this.peer(),
        (peer) => peer.request('session.create', params, { timeoutMs: CREATE_TIMEOUT_MS }),
        { withinMs: CREATE_TIMEOUT_MS, attempts: 100 },
      );
      span?.set({ 'tether.session_id': r.session.id });
      span?.end();
      const session = new RemoteSession(this, r, false);
      session.setPermissionHandler(args.canUseTool);
      return this.adopt(session);
    } catch (err) {
      span?.end(err);
      throw err;
    } finally {
      this.progress.delete(createId);
    }
  }

  /**
   * Attaches to a running session; history from `fromSeq` (default: the beginning), then live.
   * An attach cut off by a reconnect is sent again on the next connection.
   */
  async attach(sessionId: string, opts: { fromSeq?: number; readOnly?: boolean; canUseTool?: CanUseTool } = {}): Promise<RemoteSession> {
    const span = this.tracer?.start(
      'tether.client.attach',
      undefined,
      { 'tether.session_id': sessionId, 'tether.from_seq': opts.fromSeq },
      'client',
    );
    const params = { session_id: sessionId, from_seq: opts.fromSeq, read_only: opts.readOnly, trace: span?.context };
    const r = await acrossReconnects(
      () => this.peer(),
      (peer) => {
        this.early.set(sessionId, []); // frames of an attempt cut off are sent again with the next one
        return peer.request('session.attach', params);
      },
    ).catch((err: unknown) => {
      span?.end(err);
      throw err;
    });
    span?.end();
    const session = new RemoteSession(this, r, opts.readOnly ?? false);
    session.setPermissionHandler(opts.canUseTool);
    return this.adopt(session);
  }

  /** Detaches from a session; it keeps running on the agent. */
  async detach(session: RemoteSession): Promise<void> {
    this.sessions.delete(session.id);
    session.finish('done');
    const peer = this.link.peer;
    if (peer) await peer.request('session.detach', { session_id: session.id }).catch(() => {});
  }

  /** Closes the connection; sessions keep running on their agents. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await this.link.close();
    this.failAll(new TetherError('CANCELLED', 'client closed'));
    await this.opts.telemetry?.flush();
  }

  private adopt(session: RemoteSession): RemoteSession {
    this.sessions.set(session.id, session);
    for (const f of this.early.get(session.id) ?? []) session.onFrame(f);
    this.early.delete(session.id);
    return session;
  }

  private setup(peer: RpcPeer): void {
    // Engine-line frames: the line is sliced out as the engine wrote it, never parsed here.
    const frames = new EngineFrameReader(); // this connection's: it remembers the session id read last
    peer.onRawText((text) => {
      const f = frames.read(text);
      if (f) this.routeFrame(f);
      return f !== undefined;
    });
    // Event frames, and line frames in another layout (a line re-serialized: not byte-exact).
    peer.onNotification('session.frame', (f) =>
      this.routeFrame({
        session_id: f.session_id,
        seq: f.seq,
        origin: f.origin,
        event: f.event,
        line: f.message && JSON.stringify(f.message),
      }),
    );
    peer.onNotification('session.reply', (r) => this.sessions.get(r.session_id)?.onReply(r));
    peer.onNotification('fleet.changed', () => {
      for (const w of this.fleetWatchers) w();
    });
    peer.onNotification('session.post_result', (r) => this.sessions.get(r.session_id)?.onPostResult(r));
    void peer.channel.closed.then(() => {
      for (const s of this.sessions.values()) s.onLinkLost(peer);
    });
    peer.onNotification('session.create_progress', (p) => {
      if (p.create_id !== undefined)
        this.progress.get(p.create_id)?.({ session_id: p.session_id, agent: p.agent, status: p.status, message: p.message });
    });
  }

  private routeFrame(f: IncomingFrame): void {
    const s = this.sessions.get(f.session_id);
    if (s) return s.onFrame(f);
    // Frames of a session being created or attached arrive before its answer.
    const buf = this.early.get(f.session_id) ?? [];
    if (buf.length < MAX_EARLY_FRAMES) buf.push(f);
    this.early.set(f.session_id, buf);
    if (this.early.size > 64) this.early.delete(this.early.keys().next().value as string);
  }

  /** After a reconnect: re-attach every open session from the seq after its last one. */
  private async resume(peer: RpcPeer): Promise<void> {
    this.resuming = true;
    for (const s of this.sessions.values()) {
      try {
        const r = await peer.request('session.attach', {
          session_id: s.id,
          from_seq: s.lastSeq + 1,
          read_only: s.readOnly,
          previous_client_id: s.clientId,
        });
        s.role = r.role;
        s.clientId = r.client_id;
      } catch (err) {
        const e = asTetherError(err, 'UNAVAILABLE');
        if (peer.channel.isClosed || e.retryable) {
          // The link dropped (or is dropping: a closing socket refuses sends before the channel
          // reports closed) during the resume, or the gateway said retry: keep every session
          // (and every waiter) and resume them from the same seqs on a new connection.
          this.log.warn({ sessionId: s.id, err: e.message }, 'resume failed; will resume after a reconnect');
          peer.channel.close('UNAVAILABLE', `resume failed: ${e.message}`);
          this.resuming = false;
          return;
        }
        this.log.warn({ sessionId: s.id, err: String(err) }, 'could not resume session');
        this.sessions.delete(s.id);
        s.finish(err instanceof TetherError ? err : new TetherError('UNAVAILABLE', String(err)));
      }
    }
    this.resuming = false;
    const waiters = this.peerWaiters;
    this.peerWaiters = [];
    for (const w of waiters) w(peer);
  }

  private failAll(err: TetherError): void {
    this.closed = true;
    for (const s of this.sessions.values()) s.finish(err);
    this.sessions.clear();
    const waiters = this.peerWaiters;
    this.peerWaiters = [];
    for (const w of waiters) w(err);
  }
}
