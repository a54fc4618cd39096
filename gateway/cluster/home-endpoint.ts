import { randomUUID } from 'node:crypto';
import type { InboxItem } from '../../core/protocol/inbox.js';
import type { Msg, Subscription } from '@nats-io/transport-node';
import { TetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';
import { Methods, type ParamsOf, type SessionInfo } from '../../core/protocol/methods.js';
import type { GatewayMetrics } from '../metrics.js';
import type { Principal } from '../door/principal.js';
import { applySessionCall } from '../directory/session-calls.js';
import type { SessionCall, SessionCallParams } from '../../core/protocol/methods.js';
import type { SessionDirectory } from '../directory/session-directory.js';
import type { Durability, Member } from '../session/session.js';
import { answer, CallRequest, decode, encode, ListRequest, ReleaseRequest, type CallerWire } from './cluster-wire.js';
import { DropLog, type FabricMac } from './fabric-mac.js';
import type { JetStreamSessionStore } from './jetstream-store.js';
import type { NatsLink } from './nats-link.js';

/** The subject a gateway answers `verb` on. */
export function gatewaySubject(gatewayId: string, verb: 'call' | 'reply' | 'release' | 'list'): string {
  return `tether.gw.${gatewayId}.${verb}`;
}

/**
 * A client of another gateway attached to a session held here. It takes part exactly like a
 * local client (presence, roles, first answer wins, dedupe by principal and input id); only
 * its frames travel differently: its gateway reads them from the session's log in JetStream,
 * so nothing is sent from here. Answers to its own control requests go to its gateway.
 */
class RemoteMember implements Member {
  readonly sessions = new Set<string>();

  constructor(
    readonly clientId: string,
    readonly principal: string,
    readonly transport: string,
    readonly gateway: string,
    private readonly reply: (gateway: string, sessionId: string, clientId: string, line: string) => void,
  ) {}

  sendFrame(): void {}

  sendReply(sessionId: string, line: string): void {
    this.reply(this.gateway, sessionId, this.clientId, line);
  }
}

/**
 * What this gateway answers other gateways of the cluster: client calls about the sessions it
 * holds (`call`), letting go of a session whose agent moved (`release`), and its part of a
 * fleet listing (`list`).
 */
export class HomeEndpoint {
  private readonly members = new Map<string, RemoteMember>();
  private readonly subs: Subscription[] = [];
  private readonly forged: DropLog;

  constructor(
    private readonly link: NatsLink,
    private readonly gatewayId: string,
    private readonly dir: SessionDirectory,
    private readonly store: JetStreamSessionStore,
    /** The gateway's, over `store`: a session is let go once all of it is written. */
    private readonly durability: Durability,
    private readonly log: Logger,
    private readonly mac: FabricMac,
    private readonly metrics?: GatewayMetrics,
  ) {
    this.forged = new DropLog(log, 'dropping a call no gateway sent');
    this.serve('call', (m) => this.call(decode(CallRequest, m.data)));
    this.serve('release', (m) => this.release(decode(ReleaseRequest, m.data)));
    this.serve('list', (m) => this.list(decode(ListRequest, m.data).principal));
  }

  private serve(verb: 'call' | 'release' | 'list', handle: (m: Msg) => unknown): void {
    const sub = this.link.nc.subscribe(gatewaySubject(this.gatewayId, verb));
    this.subs.push(sub);
    void (async () => {
      for await (const m of sub) {
        try {
          this.mac.openMessage(m);
        } catch (err) {
          // Not from a gateway of this cluster (or a replay): not acted on, not answered.
          this.forged.note({ verb, err: (err as Error).message });
          continue;
        }
        void answer(() => handle(m)).then((body) => {
          this.log.trace({ verb, bytes: body.length }, 'answered another gateway');
          if (m.reply) this.send(() => m.respond(body, { headers: this.mac.sealMessage(m.reply!, body) }));
        });
      }
    })();
  }

  /** Sends on the NATS connection; a closed one (shutting down) drops it, logged, never thrown into routing. */
  private send(publish: () => void): void {
    try {
      publish();
    } catch (err) {
      this.log.debug({ err: String(err) }, 'not sent to another gateway');
    }
  }

  private member(c: CallerWire): RemoteMember {
    let m = this.members.get(c.client_id);
    if (!m) {
      m = new RemoteMember(c.client_id, c.principal.sub, `${c.transport}@${c.gateway}`, c.gateway, (gw, session_id, client_id, line) =>
        this.send(() => {
          const subject = gatewaySubject(gw, 'reply');
          const body = encode({ session_id, client_id, line });
          this.link.nc.publish(subject, body, { headers: this.mac.sealMessage(subject, body) });
        }),
      );
      this.members.set(c.client_id, m);
      this.dir.addClient(c.client_id, c.principal); // so an owner here can hand it control
    }
    return m;
  }

  private forgetIfIdle(m: RemoteMember): void {
    if (m.sessions.size) return;
    this.members.delete(m.clientId);
    this.dir.removeClient(m.clientId);
  }

  private async call(req: CallRequest): Promise<unknown> {
    const p: Principal = req.caller.principal;
    const params = Methods[req.method].params.parse(req.params);
    this.log.debug(
      { method: req.method, client: req.caller.client_id, gateway: req.caller.gateway, principal: p.sub },
      'call from another gateway',
    );
    const m = this.member(req.caller);
    try {
      if (req.method === 'session.create') return await this.create(p, m, params as ParamsOf<'session.create'>);
      const sessionId = (params as { session_id?: string }).session_id;
      if (sessionId === undefined) throw new TetherError('INVALID_ARGUMENT', `${req.method} from another gateway names no session`);
      if (!this.dir.get(sessionId))
        throw new TetherError('UNAVAILABLE', `session ${sessionId} is not held by gateway ${this.gatewayId} any more; it is moving`);
      const result = await applySessionCall(
        this.dir,
        { principal: p, member: m },
        req.method as SessionCall,
        { ...params, session_id: sessionId } as SessionCallParams<SessionCall>,
        this.metrics,
      );
      if (req.method === 'session.attach') m.sessions.add(sessionId);
      if (req.method === 'session.detach') m.sessions.delete(sessionId);
      return result;
    } finally {
      this.forgetIfIdle(m);
    }
  }

  /** A create from a client of another gateway, on an agent connected here (as ClientLink does it). */
  private async create(p: Principal, m: RemoteMember, params: ParamsOf<'session.create'>): Promise<unknown> {
    if (!p.canCreate) throw new TetherError('PERMISSION_DENIED', 'this token may not create sessions');
    const session = await this.dir.create(p, params.agent, params.engine, params.options ?? {}, randomUUID(), {
      createId: params.create_id,
      trace: params.trace,
    });
    const role = session.roles.roleFor(p);
    session.attach(m, role);
    m.sessions.add(session.id);
    return { session: { ...session.info(), gateway: this.gatewayId }, role, client_id: m.clientId };
  }

  /**
   * The session's agent now talks to gateway `to`: once everything of the session is in
   * JetStream, this gateway forgets it (without ending it) and cuts its clients here, who
   * resume through the new home.
   */
  private async release(req: { session_id: string; to: string }): Promise<unknown> {
    this.releaseLocal(req.session_id, `session ${req.session_id} moved to gateway ${req.to}`);
    await new Promise<void>((resolve) => this.durability.mayAck(resolve)); // what may be acked is in JetStream
    return {};
  }

  /** Lets go of a session held here; idempotent. */
  releaseLocal(sessionId: string, reason: string): void {
    const s = this.dir.release(sessionId);
    if (!s) return;
    this.store.forget(sessionId);
    this.log.info({ sessionId, reason }, 'session released to another gateway');
    for (const c of s.info().clients) {
      this.dir.cutClient(c.client_id, reason);
      const remote = this.members.get(c.client_id);
      if (remote) {
        remote.sessions.delete(sessionId);
        this.forgetIfIdle(remote);
      }
    }
  }

  private list(p: Principal): { sessions: SessionInfo[]; agents: unknown[]; needs: InboxItem[] } {
    return {
      needs: this.dir.needsYou(p).map((n) => ({ ...n, gateway: this.gatewayId })),
      sessions: this.dir.listSessions(p).map((s) => ({ ...s, gateway: this.gatewayId })),
      agents: this.dir.listAgents(p).map((a) => ({ ...a, gateway: this.gatewayId })),
    };
  }

  /** Clients of gateways no longer alive are detached from the sessions here (presence shows it). */
  dropMembersOf(liveGateways: Set<string>): void {
    for (const m of [...this.members.values()]) {
      if (liveGateways.has(m.gateway)) continue;
      for (const id of m.sessions) this.dir.get(id)?.detach(m.clientId);
      m.sessions.clear();
      this.forgetIfIdle(m);
    }
  }

  close(): void {
    for (const s of this.subs) s.unsubscribe();
  }
}
