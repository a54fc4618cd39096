import { randomBytes, randomUUID } from 'node:crypto';
import { asTetherError, TetherError } from '../core/errors.js';
import type { ParamsOf } from '../core/protocol/methods.js';
import type { RpcPeer } from '../core/rpc/peer.js';
import type { Role } from '../core/protocol/events.js';
import type { Principal } from './principal.js';
import type { Member } from './session.js';
import type { GatewayMetrics } from './metrics.js';
import type { SessionDirectory } from './session-directory.js';
import { readAudit } from './audit-access.js';
import { stopAcrossCuts } from './session-stop.js';
import { requireControlScope } from './session-roles.js';
import { checkControlAudited } from './policy-gate.js';

/**
 * Per-connection outbound budget before the peer is cut as a slow consumer. threats.md
 * suggests a hard 32 MiB; one frame may be 33 MiB (a 16 MiB engine line at worst escaping),
 * so the cut comes at 64 MiB: about two of the largest frames behind. The gateway gives it to
 * every connection's RpcPeer, so frames, replies and events all count toward it.
 */
export const DEFAULT_SLOW_CLIENT_BYTES = 64 * 1024 * 1024;

/**
 * One connected client: answers its requests against the session directory and receives
 * session frames as a Member. A client that stops reading is cut by its peer's outbound
 * budget (frames, replies and events alike); it may resume from its last seq.
 */
export class ClientLink implements Member {
  readonly clientId = `c-${randomBytes(6).toString('hex')}`;
  private readonly attached = new Set<string>();

  constructor(
    readonly peer: RpcPeer,
    readonly principal_: Principal,
    private readonly dir: SessionDirectory,
    private readonly metrics?: GatewayMetrics,
  ) {
    this.register();
    dir.clients.set(this.clientId, principal_);
    metrics?.clientConnected(this.transport);
    void peer.channel.closed.then(() => {
      metrics?.clientDisconnected(this.transport);
      dir.clients.delete(this.clientId);
      for (const id of this.attached) this.dir.get(id)?.detach(this.clientId);
      this.attached.clear();
    });
  }

  get principal(): string {
    return this.principal_.sub;
  }

  get transport(): string {
    return this.peer.channel.transport;
  }

  sendFrame(frame: Buffer, readAtMs?: number): void {
    if (!this.peer.post(frame)) return;
    if (this.metrics) {
      this.metrics.relayed('to_client', frame.length);
      if (readAtMs !== undefined) this.metrics.relayLatency(frame, readAtMs);
    }
  }

  sendReply(sessionId: string, line: string): void {
    this.peer.notify('session.reply', { session_id: sessionId, line }).catch(() => {});
  }

  /** One input line from this client (session.send or session.post), at most once per input id. */
  private input(params: ParamsOf<'session.send'>): 'applied' | 'duplicate' {
    const p = this.principal_;
    const session = this.dir.visible(p, params.session_id);
    requireControlScope(p, 'send to sessions');
    if (params.line.type === 'control_request') checkControlAudited(this.dir, session.id, p, this.clientId, params.line, session.roleOf(this.clientId), session.options.cwd);
    const status = session.input(this.clientId, params.input_id, params.line);
    if (status === 'applied') this.metrics?.relayed('from_client', Buffer.byteLength(JSON.stringify(params.line)));
    return status;
  }

  /**
   * A prompt sent without a request: applied, its echo (carrying the input id) answers it;
   * otherwise one session.post_result says it was a duplicate or why it was refused.
   */
  private post(params: ParamsOf<'session.send'>): void {
    let result: { status: 'duplicate' } | { error: ReturnType<TetherError['toJsonRpc']> } | undefined;
    try {
      if (params.line.type !== 'user') throw new TetherError('INVALID_ARGUMENT', 'session.post carries prompts (type "user") only; send other lines with session.send');
      if (this.input(params) === 'duplicate') result = { status: 'duplicate' };
    } catch (err) {
      result = { error: asTetherError(err).toJsonRpc() };
    }
    if (result) this.peer.notify('session.post_result', { session_id: params.session_id, input_id: params.input_id, ...result }).catch(() => {});
  }

  /** A connection that closed must not be attached to anything: it would never be detached. */
  private assertOpen(): void {
    if (this.peer.channel.isClosed) throw new TetherError('UNAVAILABLE', 'connection closed');
  }

  private register(): void {
    const p = this.principal_;
    this.peer
      .onRequest('agents.list', () => ({ agents: this.dir.listAgents(p) }))
      .onRequest('sessions.list', () => ({ sessions: this.dir.listSessions(p) }))
      .onRequest('session.create', async (params) => {
        if (!p.canCreate) throw new TetherError('PERMISSION_DENIED', 'this token may not create sessions');
        const session = await this.dir.create(p, params.agent, params.engine, params.options, randomUUID(), {
          createId: params.create_id,
          onProgress: (progress) => void this.peer.notify('session.create_progress', { ...progress, create_id: params.create_id }).catch(() => {}),
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
      })
      .onRequest('session.attach', (params) => {
        this.assertOpen();
        const session = this.dir.visible(p, params.session_id);
        const role: Role = session.roles.roleFor(p, params.read_only);
        const nextSeq = session.attach(this, role, params.from_seq, params.previous_client_id);
        if (params.from_seq !== undefined) this.metrics?.resumed('client');
        this.attached.add(session.id);
        return { session: session.info(), role, client_id: this.clientId, next_seq: nextSeq };
      })
      .onRequest('session.detach', (params) => {
        this.dir.visible(p, params.session_id).detach(this.clientId);
        this.attached.delete(params.session_id);
        return {};
      })
      .onRequest('session.send', (params) => ({ status: this.input(params) }))
      .onNotification('session.post', (params) => this.post(params))
      .onRequest('session.set_role', (params) => {
        const session = this.dir.visible(p, params.session_id);
        requireControlScope(p, 'change roles');
        session.setRole(this.clientId, params.client_id, params.role, (id) => this.dir.mayControl(id));
        return {};
      })
      .onRequest('session.audit', (params) => readAudit(this.dir, p, params))
      .onRequest('session.stop', async (params) => {
        const session = this.dir.visible(p, params.session_id);
        requireControlScope(p, 'stop sessions');
        await stopAcrossCuts(session, this.dir.waits, this.clientId, `stopped by ${p.sub}`, this.dir.agentWaitMs, params.signal);
        return {};
      });
  }
}
