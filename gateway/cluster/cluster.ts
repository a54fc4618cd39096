import type { Msg } from '@nats-io/transport-node';
import { Gauge } from 'prom-client';
import { TetherError, asTetherError } from '../../core/errors.js';
import type { Logger } from '../../core/logging.js';
import type { AgentDescriptor, AgentInfo, ParamsOf, ResultOf, SessionInfo } from '../../core/protocol/methods.js';
import type { Gateway } from '../gateway.js';
import type { Principal } from '../door/principal.js';
import type { ReadinessCheck } from '../readiness.js';
import type { ReplayLogLimits } from '../session/session.js';
import type { SessionCall, SessionCallParams } from '../../core/protocol/methods.js';
import type { SessionDirectory } from '../directory/session-directory.js';
import type { ProxiedClient, SessionsElsewhere } from '../directory/sessions-elsewhere.js';
import { decode, encode, ReplyNotice, unwrap, type CallRequest } from './cluster-wire.js';
import { gatewaySubject, HomeEndpoint } from './home-endpoint.js';
import { JetStreamSessionStore } from './jetstream-store.js';
import { DropLog, type FabricMac } from './fabric-mac.js';
import type { NatsDial } from './nats-auth.js';
import { CLUSTER_CALL_MS, CLUSTER_CREATE_WAIT_MS } from '../../core/timeouts.js';
import { NatsLink } from './nats-link.js';
import { SharedNotify } from './shared-notify.js';
import { SharedTrust } from './shared-trust.js';
import { ANNOUNCE_EVERY_MS, ClusterRegistry, SESSION_TOUCH_EVERY_MS, type GatewayEntry, type SessionEntry } from './registry.js';
import { SessionMirror } from './session-mirror.js';
import { FleetChanges } from './fleet-changes.js';
import { UsageStream } from './usage-stream.js';
import type { UsageLedger } from '../usage/usage-ledger.js';
import type { InboxItem } from '../../core/protocol/inbox.js';

/** How long a forwarded call waits for the session's home (a stop waits for the engine). */
const CALL_TIMEOUT_MS = CLUSTER_CALL_MS;
const STOP_TIMEOUT_MS = 45_000;
/** How long a fleet listing waits for each other gateway. */
const LIST_TIMEOUT_MS = 2_000;
/** An agent's arrival is announced this soon after its hello (once it is listed here). */
const ANNOUNCE_SOON_MS = 100;
/** How long a stop waits for turns booked here to reach the usage stream. */
const USAGE_FLUSH_MS = 2_000;
/** How long a gateway taking over a session waits for its old home to let go. */
const RELEASE_TIMEOUT_MS = 3_000;

/** One gateway's part of a fleet listing (its `list` answer, home-endpoint.ts). */
interface FleetPart {
  sessions: SessionInfo[];
  agents: AgentInfo[];
  needs: InboxItem[];
}

/**
 * One gateway's membership in a cluster on NATS JetStream (docs/architecture.md, "Several
 * gateways"). Built before the gateway (it provides the session store), then `attach`ed to it:
 * from then on sessions held elsewhere are reached through their home gateway (calls by
 * request-reply, frames from the session's log in JetStream), agents that arrive here bring
 * their sessions here, and the registry tells the fleet what this gateway holds.
 */
export class Cluster implements SessionsElsewhere {
  /** This gateway's id in the cluster (its Gateway's id), set by attach. */
  gatewayId = '';
  private dir!: SessionDirectory;
  private replayLimits!: ReplayLogLimits;
  private home!: HomeEndpoint;
  private changes: FleetChanges | undefined;
  /** Sessions of the fleet and their homes, kept current by a watch on the registry. */
  private readonly homes = new Map<string, SessionEntry>();
  private readonly mirrors = new Map<string, SessionMirror>();
  /** Clients of this gateway attached to sessions held elsewhere. */
  private readonly proxied = new Map<string, ProxiedClient>();
  private live: GatewayEntry[] = [];
  private announcer: NodeJS.Timeout | undefined;
  private stopWatch: (() => void) | undefined;
  /** Sessions this gateway is taking over now (an agent's hello brought them). */
  private readonly takingOver = new Set<string>();
  private usage: UsageStream | undefined;
  /** When this gateway last rewrote the registry entries of the sessions it holds. */
  private touchedAt = Date.now();
  private closed = false;

  private constructor(
    readonly link: NatsLink,
    readonly registry: ClusterRegistry,
    readonly store: JetStreamSessionStore,
    /** Revocations and host-key pins every gateway of the cluster checks. */
    readonly trust: SharedTrust,
    /** People's notification settings and the VAPID keys every gateway of the cluster uses. */
    readonly notify: SharedNotify,
    private readonly mac: FabricMac,
    private readonly log: Logger,
  ) {}

  /**
   * Connects to NATS as `dial` says and opens the stream and buckets (creating them on first
   * use). `mac`: the fabric's key, which every gateway of the cluster derives from the same
   * token key. UNAVAILABLE when NATS cannot be reached or refuses the gateway: it then refuses
   * to start.
   */
  static async join(dial: NatsDial, mac: FabricMac, log: Logger): Promise<Cluster> {
    const link = await NatsLink.open(dial, 'tether-gateway', log);
    try {
      const registry = await ClusterRegistry.open(link.nc, mac, log.child({ component: 'cluster-registry' }));
      const store = await JetStreamSessionStore.open(link, registry, log.child({ component: 'cluster-store' }), mac);
      const trust = await SharedTrust.open(link, mac, log.child({ component: 'cluster-trust' }));
      const notify = await SharedNotify.open(link, mac, log.child({ component: 'cluster-notify' }));
      return new Cluster(link, registry, store, trust, notify, mac, log.child({ component: 'cluster' }));
    } catch (err) {
      await link.close();
      throw new TetherError('UNAVAILABLE', `the cluster's NATS server at ${dial.shown} has no usable JetStream: ${(err as Error).message}`);
    }
  }

  /** Joins `gateway` (built with this cluster's store) to the fleet. */
  async attach(gateway: Gateway): Promise<void> {
    this.gatewayId = gateway.id;
    this.dir = gateway.directory;
    this.replayLimits = gateway.limits.replay;
    this.store.home = gateway.id;
    this.home = new HomeEndpoint(this.link, gateway.id, this.dir, this.store, gateway.durability, this.log, this.mac, gateway.metrics);
    this.dir.elsewhere = this;
    this.changes = new FleetChanges(this.link, gateway.id, this.mac, this.dir.feed, this.log);
    const replies = this.link.nc.subscribe(gatewaySubject(gateway.id, 'reply'));
    const dropped = new DropLog(this.log, 'dropping a bad or unsealed reply from another gateway');
    void (async () => {
      for await (const m of replies) {
        try {
          const r = decode(ReplyNotice, this.mac.openMessage(m));
          this.proxied.get(r.client_id)?.sendReply(r.session_id, r.line);
        } catch (err) {
          dropped.note({ err: String(err) });
        }
      }
    })();
    await this.watchHomes();
    // A restarted NATS server forgets the watch's consumer: watch afresh (and catch up) when the link is back.
    this.link.onChange((s) => {
      if (s.kind === 'up')
        void this.watchHomes().catch((err: unknown) => this.log.warn({ err: String(err) }, 'cannot watch the session registry again'));
    });
    this.bindMetrics(gateway);
    await this.announce();
    this.announcer = setInterval(() => void this.announce(), ANNOUNCE_EVERY_MS);
    this.announcer.unref();
  }

  /**
   * Makes `ledger` the fleet's (after attach): turns booked here go to the cluster's usage
   * stream and every gateway's turns come into it, read from the stream's start first.
   */
  async shareUsage(ledger: UsageLedger, retentionDays: number): Promise<void> {
    this.usage = await UsageStream.share(this.link, this.mac, ledger, {
      gatewayId: this.gatewayId,
      retentionDays,
      log: this.log.child({ component: 'cluster-usage' }),
    });
  }

  /** /readyz: the link to NATS is up. */
  readonly readiness: ReadinessCheck = {
    name: 'cluster',
    check: () => {
      const s = this.link.state;
      if (s.kind === 'up') return undefined;
      if (s.kind === 'closed') return 'cluster link closed';
      return `NATS link down for ${Math.round((Date.now() - s.sinceMs) / 1000)} s (${this.link.url}); ${this.store.unpublishedBytes} bytes waiting to be published`;
    },
  };

  /** Which gateway holds what, read when /metrics is scraped (labelled with this gateway's id). */
  private bindMetrics(gateway: Gateway): void {
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['gateway'],
        registers: [gateway.metrics.registry],
        collect() {
          this.set({ gateway: gateway.id }, read());
        },
      });
    gauge('tether_cluster_link_up', "Whether this gateway is connected to the cluster's NATS server (1) or not (0).", () =>
      this.link.isUp ? 1 : 0,
    );
    gauge(
      'tether_cluster_sessions_held',
      'Sessions this gateway holds (their agents are connected here), by gateway id.',
      () => this.dir.sessionList().length,
    );
    gauge('tether_cluster_agents_held', 'Agents connected to this gateway, by gateway id.', () => this.dir.agentList().length);
    gauge(
      'tether_cluster_unpublished_bytes',
      'Session records appended but not yet acknowledged by JetStream.',
      () => this.store.unpublishedBytes,
    );
  }

  /** Tells the fleet what this gateway holds; drops members of gateways gone silent. */
  private async announce(): Promise<void> {
    if (this.closed || !this.link.isUp) return;
    try {
      await this.registry.announce({
        id: this.gatewayId,
        agents: this.dir.agentList().map((a) => a.name),
        sessions: this.dir.sessionList().map((s) => s.id),
        at: new Date().toISOString(),
      });
      const before = this.live.map((g) => g.id).join();
      this.live = await this.registry.liveGateways();
      if (this.live.map((g) => g.id).join() !== before) this.dir.feed.changedElsewhere(); // a gateway came or went, and its agents with it
      this.home.dropMembersOf(new Set(this.live.map((g) => g.id)));
      if (Date.now() - this.touchedAt >= SESSION_TOUCH_EVERY_MS) {
        this.touchedAt = Date.now();
        for (const s of this.dir.sessionList()) await this.registry.touchSession(s.id).catch(() => {}); // kept from ageing out
      }
    } catch (err) {
      this.log.debug({ err: String(err) }, 'cluster announce failed; next in a moment');
    }
  }

  private async watchHomes(): Promise<void> {
    this.stopWatch?.();
    this.stopWatch = await this.registry.watchSessions((id, entry) => this.onSessionEntry(id, entry));
  }

  /** A session's entry changed: clients here of a session that moved resume at its new home. */
  private onSessionEntry(id: string, entry: SessionEntry | undefined): void {
    const before = this.homes.get(id);
    if (entry) this.homes.set(id, entry);
    else this.homes.delete(id);
    if (!before || (entry && before.home === entry.home)) return;
    if (entry?.home === this.gatewayId && this.takingOver.has(id)) return; // takeOver cuts them once the session is held here
    const reason = entry ? `session ${id} moved to gateway ${entry.home}; resume there` : `session ${id} is gone`;
    this.cutMirror(id, reason);
    if (entry && entry.home !== this.gatewayId && this.dir.get(id)) this.home.releaseLocal(id, reason);
  }

  private cutMirror(id: string, reason: string): void {
    const mirror = this.mirrors.get(id);
    if (!mirror) return;
    this.mirrors.delete(id);
    for (const clientId of mirror.clientIds()) this.proxied.get(clientId)?.cut(reason);
    mirror.close();
  }

  private async request<T>(gatewayId: string, verb: 'call' | 'release' | 'list', body: unknown, timeout: number): Promise<T> {
    let m: Msg;
    try {
      const subject = gatewaySubject(gatewayId, verb);
      const data = encode(body);
      m = await this.link.nc.request(subject, data, { timeout, headers: this.mac.sealMessage(subject, data) });
    } catch (err) {
      throw new TetherError(
        'UNAVAILABLE',
        `gateway ${gatewayId} did not answer (${(err as Error).message}); if it is gone, its agents are moving to another gateway`,
      );
    }
    try {
      this.mac.openMessage(m);
    } catch (err) {
      // Not this cluster's key (a gateway with another --key, or not a gateway): never believed.
      this.log.warn({ gateway: gatewayId, verb, err: (err as Error).message }, 'dropping an answer no gateway of this cluster sent');
      throw new TetherError('UNAVAILABLE', `the answer from gateway ${gatewayId} was not signed with this cluster's key`);
    }
    return unwrap<T>(m.data);
  }

  private caller(client: ProxiedClient, p: Principal): CallRequest['caller'] {
    return { principal: p, client_id: client.clientId, transport: client.transport, gateway: this.gatewayId };
  }

  forward<M extends SessionCall>(
    method: M,
    params: SessionCallParams<M>,
    client: ProxiedClient,
    p: Principal,
  ): Promise<ResultOf<M>> | undefined {
    // The audit of a session no gateway holds any more (ended, dropped) is read here, as before.
    if (method === 'session.audit' && !this.homes.has(params.session_id)) return undefined;
    return this.forwardTo(method, params, client, p);
  }

  private async forwardTo<M extends SessionCall>(
    method: M,
    params: SessionCallParams<M>,
    client: ProxiedClient,
    p: Principal,
  ): Promise<ResultOf<M>> {
    const id = params.session_id;
    let entry = this.homes.get(id);
    if (!entry) {
      entry = (
        await this.registry
          .getSession(id)
          .catch((err: unknown) => void this.log.debug({ sessionId: id, err: String(err) }, 'registry read failed'))
      )?.value;
      this.log.debug({ sessionId: id, entry }, 'forward: session not cached');
      if (!entry) throw new TetherError('NOT_FOUND', `no session ${id}`);
      this.homes.set(id, entry);
    }
    if (entry.home === this.gatewayId)
      throw new TetherError('UNAVAILABLE', `session ${id} is moving to this gateway; try again in a moment`);
    const call: CallRequest = { method, params: params as Record<string, unknown>, caller: this.caller(client, p) };
    const result = await this.request<ResultOf<M>>(entry.home, 'call', call, method === 'session.stop' ? STOP_TIMEOUT_MS : CALL_TIMEOUT_MS);
    if (method === 'session.attach') {
      await this.feed(id, client, (params as ParamsOf<'session.attach'>).from_seq);
      (result as ResultOf<'session.attach'>).session.gateway = entry.home;
    }
    if (method === 'session.detach') this.unfeed(id, client.clientId);
    return result;
  }

  /** Starts feeding `client` the session's frames from the mirror here (made on first use). */
  private async feed(id: string, client: ProxiedClient, fromSeq?: number): Promise<void> {
    let mirror = this.mirrors.get(id);
    if (!mirror) this.mirrors.set(id, (mirror = new SessionMirror(this.link, id, this.replayLimits, this.log, this.mac)));
    this.proxied.set(client.clientId, client);
    await mirror.attach(client, fromSeq);
  }

  private unfeed(id: string, clientId: string): void {
    const mirror = this.mirrors.get(id);
    if (mirror && mirror.detach(clientId) === 0) {
      mirror.close();
      this.mirrors.delete(id);
    }
    if (![...this.mirrors.values()].some((m) => m.clientIds().includes(clientId))) this.proxied.delete(clientId);
  }

  async create(params: ParamsOf<'session.create'>, client: ProxiedClient, p: Principal): Promise<ResultOf<'session.create'> | undefined> {
    // Announcements may lag an agent that just connected: the gateways are asked.
    const holder = (await this.fleet(p, [], 'agents')).find((a) => a.name === params.agent && a.gateway !== this.gatewayId)?.gateway;
    if (!holder) return undefined;
    {
      const call: CallRequest = { method: 'session.create', params: params as Record<string, unknown>, caller: this.caller(client, p) };
      const result = await this.request<ResultOf<'session.create'>>(holder, 'call', call, CLUSTER_CREATE_WAIT_MS);
      const id = result.session.id;
      const known = await this.registry.getSession(id).catch(() => undefined);
      if (known) this.homes.set(id, known.value);
      await this.feed(id, client, 1);
      return result;
    }
  }

  holderOf(sessionId: string, p: Principal): string | undefined {
    const entry = this.homes.get(sessionId);
    if (!entry || entry.home === this.gatewayId) return undefined;
    return p.canAdmin || p.agents === undefined || p.agents.includes(entry.record.agent) ? entry.home : undefined; // no existence oracle
  }

  left(sessionId: string, client: ProxiedClient, p: Principal): void {
    this.unfeed(sessionId, client.clientId);
    const entry = this.homes.get(sessionId);
    if (!entry || entry.home === this.gatewayId) return;
    const call: CallRequest = { method: 'session.detach', params: { session_id: sessionId }, caller: this.caller(client, p) };
    this.request(entry.home, 'call', call, CALL_TIMEOUT_MS).catch(() => {}); // a home that is gone has no one to tell
  }

  listSessions(p: Principal, local: SessionInfo[]): Promise<SessionInfo[]> {
    return this.fleet(p, local, 'sessions');
  }

  listAgents(p: Principal, local: AgentInfo[]): Promise<AgentInfo[]> {
    return this.fleet(p, local, 'agents');
  }

  listNeeds(p: Principal, local: InboxItem[]): Promise<InboxItem[]> {
    return this.fleet(p, local, 'needs');
  }

  /** This gateway's part and every other live gateway's (one that does not answer in time is left out). */
  private async fleet<K extends keyof FleetPart>(p: Principal, local: FleetPart[K], kind: K) {
    type Item = FleetPart[K][number];
    const others = (await this.registry.liveGateways().catch(() => this.live)).filter((g) => g.id !== this.gatewayId);
    const parts = await Promise.all(
      others.map((g) =>
        this.request<FleetPart>(g.id, 'list', { principal: p }, LIST_TIMEOUT_MS)
          .then((r) => (r[kind] ?? []) as Item[]) // a gateway of an older release answers without `needs`
          .catch(() => [] as Item[]),
      ),
    );
    return [...local.map((x) => ({ ...x, gateway: this.gatewayId })), ...parts.flat()] as Item[];
  }

  /**
   * The agent arriving here runs sessions another gateway held: each becomes this gateway's
   * (its old home asked to let go, bounded; the registry updated with a revision check, so
   * two gateways never both take one), then read back from JetStream: history, inputs,
   * pending prompts and role decisions. The directory then binds them to the agent as after a restart.
   */
  async beforeAgent(agent: AgentDescriptor): Promise<void> {
    setTimeout(() => void this.announce(), ANNOUNCE_SOON_MS).unref(); // the fleet learns of the agent without waiting for the next round
    for (const s of agent.sessions) {
      if (this.dir.get(s.session_id)) continue;
      try {
        await this.takeOver(s.session_id);
      } catch (err) {
        const e = asTetherError(err, 'UNAVAILABLE');
        throw new TetherError(
          e.code === 'ABORTED' ? 'ABORTED' : 'UNAVAILABLE',
          `cannot take session ${s.session_id} over from its old gateway: ${e.message}`,
        );
      }
    }
  }

  private async takeOver(id: string): Promise<void> {
    this.takingOver.add(id);
    try {
      await this.takeOverNow(id);
    } finally {
      this.takingOver.delete(id);
    }
  }

  private async takeOverNow(id: string): Promise<void> {
    const found = await this.registry.getSession(id);
    if (!found) return; // the fleet never had it, or it ended and was dropped: the directory stops its engine
    const from = found.value.home;
    const started = Date.now();
    if (from !== this.gatewayId) {
      await this.request(from, 'release', { session_id: id, to: this.gatewayId }, RELEASE_TIMEOUT_MS).catch((err: unknown) => {
        this.log.info({ sessionId: id, from, err: String(err) }, 'old home did not answer; taking the session over');
      });
    }
    await this.registry.claim(id, { ...found.value, home: this.gatewayId }, found.revision);
    this.homes.set(id, { ...found.value, home: this.gatewayId });
    this.store.adopted(id);
    const stored = await this.store.load(id);
    if (!stored) throw new TetherError('UNAVAILABLE', `session ${id} vanished from the cluster while being taken over`);
    this.dir.adopt(stored);
    // Only now: this gateway's clients of it, cut, resume against the session held here.
    this.cutMirror(id, `session ${id} moved to gateway ${this.gatewayId}; resume`);
    this.log.info(
      { sessionId: id, from, frames: stored.frames.length, inputs: stored.inputs.length, ms: Date.now() - started },
      'session taken over from another gateway',
    );
  }

  /** Leaves the fleet: stops announcing and answering; what is unpublished stays with the agents. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.announcer);
    this.stopWatch?.();
    this.trust.close();
    this.notify.close();
    for (const m of this.mirrors.values()) m.close();
    this.mirrors.clear();
    this.home?.close();
    this.changes?.close();
    if (this.link.isUp) await this.usage?.flushed(USAGE_FLUSH_MS); // turns booked just before a stop reach the fleet
    this.usage?.close();
    if (this.link.isUp) await this.registry.retire(this.gatewayId).catch(() => {}); // else its entry ages out (6 s): a stop never waits on an absent NATS
    await this.link.close();
  }
}
