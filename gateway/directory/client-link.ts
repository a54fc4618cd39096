import { randomBytes, randomUUID } from 'node:crypto';
import { asTetherError, TetherError } from '../../core/errors.js';
import type { PeerHandlers, RpcPeer } from '../../core/rpc/peer.js';
import type { ParamsOf, ResultOf } from '../../core/protocol/methods.js';
import type { Principal } from '../door/principal.js';
import type { GatewayMetrics } from '../metrics.js';
import type { SessionDirectory } from './session-directory.js';
import { readAudit } from './audit-access.js';
import { applyInput, applySessionCall, type Caller } from './session-calls.js';
import { sessionsPage } from './session-pages.js';
import type { SessionCall, SessionCallParams } from '../../core/protocol/methods.js';
import type { ProxiedClient } from './sessions-elsewhere.js';
import { frameByteLength, type FrameBytes } from '../../core/wire/session-frame.js';
import { TextPieces } from '../../core/wire/text-pieces.js';
import { cutOf } from '../../core/channel/channel.js';
import type { TraceContext } from '../../core/protocol/trace-context.js';
import { summarizeUsage } from '../../core/protocol/usage.js';
import { ReplayFeed, replayWindowBytes, type ReplayMessage } from './replay-feed.js';

/**
 * Per-connection outbound budget before the peer is cut as a slow consumer. threats.md
 * suggests a hard 32 MiB; one frame may be 33 MiB (a 16 MiB engine line at worst escaping),
 * so the cut comes at 64 MiB: about two of the largest frames behind. The gateway gives it to
 * every connection's RpcPeer, so frames, replies and events all count toward it.
 */
export const DEFAULT_SLOW_CLIENT_BYTES = 64 * 1024 * 1024;

/**
 * Largest text message a joined replay builds (capability `replay.joined.v1`): frames are added
 * while the message stays within it; a frame larger than it goes alone. Large enough that a
 * late joiner's 10,000 frames take a few dozen messages, small enough that none waits long.
 */
export const JOINED_REPLAY_MAX_BYTES = 256 * 1024;

const NEWLINE = Buffer.from('\n');

/**
 * One connected client: answers its requests against the session directory and receives
 * session frames as a Member. A client that stops reading is cut by its peer's outbound
 * budget (frames, replies and events alike); it may resume from its last seq.
 */
export class ClientLink implements ProxiedClient {
  readonly clientId = `c-${randomBytes(6).toString('hex')}`;
  private readonly attached = new Set<string>();
  /** This client as the caller of its session calls. */
  private readonly caller: Caller;
  /** Ends this connection's fleet.watch; undefined until it asks. */
  private unwatch: (() => void) | undefined;
  /** A large replay being fed as the connection drains, and what waits behind it; made at the first. */
  private feed: ReplayFeed | undefined;

  constructor(
    readonly peer: RpcPeer,
    readonly principal_: Principal,
    private readonly dir: SessionDirectory,
    private readonly metrics?: GatewayMetrics,
    /** Both sides listed `replay.joined.v1`: an attach's replay goes several frames to a message. */
    private readonly joinedReplay = false,
  ) {
    this.caller = { principal: principal_, member: this };
    peer.serve(ClientLink.HANDLERS, this);
    dir.addClient(this.clientId, principal_, this);
    metrics?.clientConnected(this.transport);
    void peer.channel.closed.then((info) => {
      metrics?.clientDisconnected(this.transport);
      dir.removeClient(this.clientId);
      this.unwatch?.();
      const cut = cutOf(info); // revoked or expired token, slow consumer, heartbeat: audited as such
      for (const id of this.attached) {
        const local = this.dir.get(id);
        if (local) local.detach(this.clientId, cut);
        else this.dir.elsewhere?.left(id, this, principal_);
      }
      this.attached.clear();
    });
  }

  get principal(): string {
    return this.principal_.sub;
  }

  get transport(): string {
    return this.peer.channel.transport;
  }

  get mayControl(): boolean {
    return this.principal_.canControl;
  }

  get name(): string | undefined {
    return this.principal_.name;
  }

  sendFrame(frame: FrameBytes, readAtMs?: number): void {
    if (this.feed?.active) {
      this.feed.frame(frame, frameByteLength(frame));
      return;
    }
    if (!this.peer.post(frame)) return;
    if (this.metrics) {
      this.metrics.relayed('to_client', frameByteLength(frame));
      if (readAtMs !== undefined) this.metrics.relayLatency(frame, readAtMs);
    }
  }

  /**
   * An attach's replay: with `replay.joined.v1`, the frames joined by newlines into text
   * messages of up to {@link JOINED_REPLAY_MAX_BYTES} (the browser pays per message, not per
   * byte: 10,000 messages cost a late joiner most of a second); else one message per frame.
   * A replay larger than the connection's window is fed as it drains (ReplayFeed).
   */
  sendReplay(frames: FrameBytes[]): void {
    const messages = this.joinedReplay ? joinReplay(frames) : frames.map((frame) => single(frame));
    let total = 0;
    for (const m of messages) total += m.bytes;
    if (this.feed?.active || total > replayWindowBytes(this.peer.maxBufferedBytes)) {
      this.feed ??= new ReplayFeed(this.peer, (n) => this.metrics?.relayed('to_client', n));
      return this.feed.replay(messages);
    }
    for (const m of messages) if (this.peer.post(m.frame)) for (const n of m.sizes) this.metrics?.relayed('to_client', n);
  }

  sendReply(sessionId: string, line: string): void {
    const send = () => void this.peer.notify('session.reply', { session_id: sessionId, line }).catch(() => {});
    if (this.feed?.active) this.feed.inOrder(send, Buffer.byteLength(line));
    else send();
  }

  /** Resolves once what was queued for this client so far has left (at once unless a replay is being fed). */
  private caughtUp(): Promise<void> {
    return this.feed?.reached() ?? Promise.resolve();
  }

  /** Closes this client's connection so it resumes elsewhere (its session moved to another gateway). */
  cut(reason: string): void {
    this.peer.channel.close('UNAVAILABLE', reason);
  }

  /** A session call: applied here when this gateway holds the session, else at the gateway that does. */
  private call<M extends SessionCall>(method: M, params: SessionCallParams<M>): Promise<ResultOf<M>> {
    const p = this.principal_;
    if (!this.dir.get(params.session_id)) {
      // The cluster hop: this gateway's span goes with the call, as the parent of the home's.
      const parent = (params as { trace?: TraceContext }).trace;
      const span =
        this.dir.elsewhere &&
        this.dir.tracer?.start(
          'tether.gateway.forward',
          parent,
          { 'tether.method': method, 'tether.session_id': params.session_id },
          'client',
        );
      const forwarded = this.dir.elsewhere?.forward(
        method,
        span ? ({ ...params, trace: span.context } as SessionCallParams<M>) : params,
        this,
        p,
      );
      if (forwarded) {
        if (span)
          forwarded.then(
            () => span.end(),
            (err: unknown) => span.end(err),
          );
        return forwarded;
      }
      span?.end();
    }
    return applySessionCall(this.dir, this.caller, method, params, this.metrics);
  }

  /**
   * A prompt sent without a request: applied, its echo (carrying the input id) answers it;
   * otherwise one session.post_result says it was a duplicate or why it was refused. Applied
   * in arrival order (a session held here applies it before this returns).
   */
  private post(params: ParamsOf<'session.send'>): void {
    if (params.line.type !== 'user')
      return this.postResult(params, {
        error: new TetherError(
          'INVALID_ARGUMENT',
          'session.post carries prompts (type "user") only; send other lines with session.send',
        ).toJsonRpc(),
      });
    if (this.dir.get(params.session_id)) {
      // Held here (the round trip's path): applied in place, without a promise.
      try {
        const session = this.dir.visible(this.principal_, params.session_id);
        if (applyInput(this.dir, this.caller, session, params, this.metrics) === 'duplicate')
          this.postResult(params, { status: 'duplicate' });
      } catch (err) {
        this.postResult(params, { error: asTetherError(err).toJsonRpc() });
      }
      return;
    }
    this.call('session.send', params).then(
      (r) => r.status === 'duplicate' && this.postResult(params, { status: 'duplicate' }),
      (err: unknown) => this.postResult(params, { error: asTetherError(err).toJsonRpc() }),
    );
  }

  /** The answer to a post that was not applied now: a duplicate, or why it was refused. */
  private postResult(
    params: ParamsOf<'session.send'>,
    result: { status: 'duplicate' } | { error: ReturnType<TetherError['toJsonRpc']> },
  ): void {
    void this.peer.notify('session.post_result', { session_id: params.session_id, input_id: params.input_id, ...result }).catch(() => {});
  }

  /** A create: at the gateway its agent is connected to (this one, or another of the cluster). */
  private async create(p: Principal, params: ParamsOf<'session.create'>): Promise<ResultOf<'session.create'>> {
    const elsewhere = this.dir.agent(params.agent) ? undefined : await this.dir.elsewhere?.create(params, this, p);
    if (elsewhere) {
      this.attached.add(elsewhere.session.id); // made and attached at the gateway its agent is connected to
      return elsewhere;
    }
    const session = await this.dir.create(p, params.agent, params.engine, params.options ?? {}, randomUUID(), {
      createId: params.create_id,
      trace: params.trace,
      onProgress: (progress) =>
        void this.peer.notify('session.create_progress', { ...progress, create_id: params.create_id }).catch(() => {}),
    });
    if (this.peer.channel.isClosed) {
      // Gone before the answer: with a create_id it asks again on its next connection; without
      // one nobody can ever learn of this session, so its engine is not left running.
      if (params.create_id === undefined) void session.stop(undefined, 'its creator left before the answer').catch(() => {});
      throw new TetherError('UNAVAILABLE', 'connection closed');
    }
    const role = session.roles.roleFor(p);
    session.attach(this, role);
    this.attached.add(session.id);
    return { session: session.info(), role, client_id: this.clientId };
  }

  /** A connection that closed must not be attached to anything: it would never be detached. */
  private assertOpen(): void {
    if (this.peer.channel.isClosed) throw new TetherError('UNAVAILABLE', 'connection closed');
  }

  /** What a client may ask: one table for every ClientLink (no closures per connection). */
  private static readonly HANDLERS: PeerHandlers<ClientLink> = {
    requests: {
      'agents.list': async (l) => ({ agents: await l.dir.listAllAgents(l.principal_) }),
      'sessions.list': async (l, params) => sessionsPage(await l.dir.listAllSessions(l.principal_), params),
      'inbox.list': async (l) => ({ items: await l.dir.listAllNeeds(l.principal_) }),
      'fleet.watch': (l) => {
        l.unwatch ??= l.dir.feed.watch(() => void l.peer.notify('fleet.changed', {}).catch(() => {}));
        return {};
      },
      'session.create': async (l, params) => {
        const p = l.principal_;
        if (!p.canCreate) throw new TetherError('PERMISSION_DENIED', 'this token may not create sessions');
        const span = l.dir.tracer?.start('tether.gateway.create', params.trace, { 'tether.agent': params.agent }, 'server');
        try {
          const made = await l.create(p, { ...params, trace: span?.context ?? params.trace });
          span?.set({ 'tether.session_id': made.session.id });
          span?.end();
          return made;
        } catch (err) {
          span?.end(err);
          throw err;
        }
      },
      'session.attach': async (l, params) => {
        l.assertOpen();
        const result = await l.call('session.attach', params);
        l.attached.add(params.session_id);
        await l.caughtUp(); // the answer follows its replay, as it always has
        return result;
      },
      'session.detach': async (l, params) => {
        const result = await l.call('session.detach', params);
        l.attached.delete(params.session_id);
        return result;
      },
      'session.info': (l, params) => l.call('session.info', params),
      'session.folder': (l, params) => l.call('session.folder', params),
      'session.send': (l, params) => l.call('session.send', params),
      'session.set_role': (l, params) => l.call('session.set_role', params),
      'session.set_owner': (l, params) => l.call('session.set_owner', params),
      'session.move': (l, params) => l.call('session.move', params),
      'session.withdraw_rule': (l, params) => l.call('session.withdraw_rule', params),
      'session.withdraw_prompt': (l, params) => l.call('session.withdraw_prompt', params),
      'session.rename': (l, params) => l.call('session.rename', params),
      'session.follow': (l, params) => l.call('session.follow', params),
      'session.audit': (l, params) =>
        params.session_id === undefined
          ? readAudit(l.dir, l.principal_, params)
          : l.call('session.audit', { ...params, session_id: params.session_id }),
      'session.stop': (l, params) => l.call('session.stop', params),
      'usage.read': async (l, params) =>
        l.dir.usage?.ledger.read(l.principal_, params) ?? summarizeUsage([], params.by ?? 'principal', 'own'),
    },
    notifications: { 'session.post': (l, params) => l.post(params) },
  };
}

/** One frame as a message of its own. */
function single(frame: FrameBytes): ReplayMessage {
  const bytes = frameByteLength(frame);
  return { frame, bytes, sizes: [bytes] };
}

/** Frames joined by newlines into messages of up to {@link JOINED_REPLAY_MAX_BYTES} (a larger frame alone). */
function joinReplay(frames: readonly FrameBytes[]): ReplayMessage[] {
  const messages: ReplayMessage[] = [];
  let pieces: Uint8Array[] = [];
  let sizes: number[] = []; // the message's frames, for the per-frame metrics
  let bytes = 0;
  const flush = () => {
    if (pieces.length) messages.push({ frame: new TextPieces(pieces), bytes, sizes });
    pieces = [];
    sizes = [];
    bytes = 0;
  };
  for (const frame of frames) {
    const n = frameByteLength(frame);
    if (bytes > 0 && bytes + 1 + n > JOINED_REPLAY_MAX_BYTES) flush();
    if (bytes > 0) pieces.push(NEWLINE);
    pieces.push(...(frame instanceof TextPieces ? frame.pieces : [frame]));
    sizes.push(n);
    bytes += (bytes > 0 ? 1 : 0) + n;
  }
  flush();
  return messages;
}
