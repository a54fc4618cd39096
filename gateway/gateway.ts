import { randomBytes } from 'node:crypto';
import type { Telemetry } from '../core/telemetry/tracer.js';
import type { Channel } from '../core/channel/channel.js';
import { TetherError } from '../core/errors.js';
import { BoundLog, silentLogger, type Logger } from '../core/logging.js';
import { CAPABILITIES, PROTOCOL_VERSION, assertCompatible } from '../core/protocol/version.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { HEARTBEAT_DEFAULTS, startHeartbeat, type HeartbeatOptions } from '../core/link/heartbeat.js';
import type { AgentDescriptor } from '../core/protocol/methods.js';
import { AgentLink } from './directory/agent-link.js';
import { ClientLink, DEFAULT_SLOW_CLIENT_BYTES } from './directory/client-link.js';
import { ANONYMOUS, type Principal } from './door/principal.js';
import { noteAuthFailure } from './door/door.js';
import { authError } from '../core/auth/auth-error.js';
import { Durability, REPLAY_DEFAULTS } from './session/session.js';
import { DEFAULT_AGENT_WAIT_MS } from './directory/agent-waits.js';
import { DEFAULT_CONTROL_ANSWER_MS } from './session/session.js';
import { SessionDirectory, type DirectoryLimits } from './directory/session-directory.js';
import { MemoryAuditLog, type AuditLog } from './audit/audit-log.js';
import { MembershipRateAudit, type MembershipRate } from './audit/audit-rate.js';
import { MemorySessionStore, type SessionStore } from './session/session-store.js';
import { GatewayMetrics } from './metrics.js';
import { HostKeyPins } from './door/host-key-pins.js';
import { JsonRpcDialectLink } from './dialects/jsonrpc/link.js';
import type { Dialect } from '../core/protocol/jsonrpc-dialect.js';
import { StaticPolicy, type PolicyProvider } from './policy/policy-source.js';
import { UsageDesk } from './usage/usage-desk.js';
import { UsageLedger } from './usage/usage-ledger.js';

export const GATEWAY_CAPABILITIES: readonly string[] = [CAPABILITIES.sessionPost, CAPABILITIES.foldedAcks, CAPABILITIES.joinedReplay];

export interface GatewayLimits extends DirectoryLimits {
  helloTimeoutMs: number;
  slowClientBytes: number;
  /** Liveness of every connection after its hello (app-level ping). */
  heartbeat: HeartbeatOptions;
}

/**
 * How long a session waits for its agent (a laptop asleep, an outage, a restart) before it
 * ends: a day, so an agent away overnight finds its sessions and their queued prompts.
 */
export const AGENT_AWAY_DEFAULT_MS = 24 * 3_600_000;

/** Defaults from threats.md part 3, each overridable. */
export const GATEWAY_DEFAULTS: GatewayLimits = {
  replay: REPLAY_DEFAULTS,
  maxPendingPrompts: 32,
  promptExpiryMs: 10 * 60_000,
  controlAnswerMs: DEFAULT_CONTROL_ANSWER_MS,
  maxMembers: 32,
  agentLostTimeoutMs: AGENT_AWAY_DEFAULT_MS,
  agentWaitMs: DEFAULT_AGENT_WAIT_MS,
  endedRetentionMs: 10 * 60_000,
  maxSessionsPerPrincipal: 32,
  helloTimeoutMs: 10_000,
  slowClientBytes: DEFAULT_SLOW_CLIENT_BYTES,
  heartbeat: HEARTBEAT_DEFAULTS,
};

/** What the door hands routing about a connection's token, so it can be renewed in-band. */
export interface ConnectionAuth {
  /** When the token expires (told to the peer in its hello answer). */
  expiresAt: Date;
  /** Verifies a fresh token of the same principal and swaps it in; resolves with its expiry. */
  renew(token: string): Promise<Date>;
}

export interface GatewayOptions {
  logger?: Logger;
  /** Where audit records go (default: bounded in memory). */
  audit?: AuditLog;
  /** Attach and detach records one principal may cause per window before they are counted in a summary (default MEMBERSHIP_RATE_DEFAULTS). */
  auditMembership?: Partial<MembershipRate>;
  /** Where sessions and history are kept across restarts (default: memory only). */
  store?: SessionStore;
  limits?: Partial<GatewayLimits>;
  /** Where routing reports what /metrics shows (default: a fresh registry of this gateway's own). */
  metrics?: GatewayMetrics;
  /** Agents' pinned host keys (default: in memory, pinned afresh after a restart). */
  hostKeys?: HostKeyPins;
  /** The central policy (`--policy FILE`, reloaded on change); default: no rules. */
  policy?: PolicyProvider;
  /** The usage ledger (default: in memory, kept as long as the process); budgets come from `policy`. */
  usage?: UsageLedger;
  /**
   * What the gateway offers in its hello (default: GATEWAY_CAPABILITIES). Fewer make it speak
   * as a gateway without them, e.g. to check that peers fall back to the base protocol.
   */
  capabilities?: readonly string[];
  /** Tracing while it is on (core/telemetry/, started by the program); its spans are flushed when the gateway closes. */
  telemetry?: Telemetry;
}

/**
 * The routing core: takes open, authenticated channels from any listener and turns each
 * into an agent link or a client link after its hello. Transport-blind.
 */
export class Gateway {
  readonly id = `gw-${randomBytes(4).toString('hex')}`;
  readonly directory: SessionDirectory;
  readonly limits: GatewayLimits;
  readonly store: SessionStore;
  /** When what is appended to `store` may be acked to agents and shown: the one answer, shared by every link and session. */
  readonly durability: Durability;
  readonly metrics: GatewayMetrics;
  /** The usage room: each turn booked, prompts held to the policy's budgets; `onNotice` for budget warnings. */
  readonly usage: UsageDesk;
  private readonly log: Logger;
  private readonly channels = new Set<Channel>();
  private readonly hostKeys: HostKeyPins;
  private readonly capabilities: string[];
  /** The trail every record goes through: attach/detach loops are counted, not written one by one. */
  private readonly audit: MembershipRateAudit;
  private readonly telemetry: Telemetry | undefined;

  constructor(opts: GatewayOptions = {}) {
    this.capabilities = [...(opts.capabilities ?? GATEWAY_CAPABILITIES)];
    this.log = opts.logger ?? silentLogger;
    this.limits = { ...GATEWAY_DEFAULTS, ...opts.limits };
    this.store = opts.store ?? new MemorySessionStore();
    this.durability = new Durability(this.store);
    this.metrics = opts.metrics ?? new GatewayMetrics();
    this.hostKeys = opts.hostKeys ?? new HostKeyPins();
    this.audit = new MembershipRateAudit(opts.audit ?? new MemoryAuditLog(), opts.auditMembership, { logger: this.log });
    this.usage = new UsageDesk(opts.usage ?? new UsageLedger(), opts.policy ?? new StaticPolicy(), this.metrics);
    this.directory = new SessionDirectory(
      this.limits,
      this.log,
      this.audit,
      this.store,
      this.durability,
      this.metrics,
      opts.policy,
      this.usage,
    );
    this.directory.tracer = opts.telemetry?.tracer;
    this.telemetry = opts.telemetry;
    const sessions = () => this.directory.sessionList();
    this.metrics.bindGauges({
      agents: () => countBy(this.directory.agentList(), (a) => a.peer.channel.transport),
      sessions: () => countBy(sessions(), (s) => s.currentState),
      attachments: () =>
        countBy(
          sessions().flatMap((s) => s.info().clients),
          (c) => c.transport,
        ),
    });
  }

  private readonly countAuthFailure = (reason: string) => this.metrics.authFailure(reason);

  /**
   * Hands a connection to the gateway; it owns the channel from now on. `auth` (a bearer
   * token's connection) enables auth.renew; without it, auth.renew answers FAILED_PRECONDITION.
   * `dialect` is what the client chose at connect time (docs/jsonrpc-dialect.md); native by default.
   */
  accept(channel: Channel, principal: Principal = ANONYMOUS, auth?: ConnectionAuth, dialect: Dialect = 'native'): void {
    this.channels.add(channel);
    const log = new BoundLog(this.log, { transport: channel.transport, remote: channel.remote, principal: principal.sub });
    if (dialect === 'jsonrpc') return this.acceptDialect(channel, principal, log.logger);
    // Every message toward this peer (frames, replies, events, requests) counts toward one budget.
    let role: 'agent' | 'client' | undefined;
    const peer = new RpcPeer(channel, {
      logger: log,
      maxBufferedBytes: this.limits.slowClientBytes,
      onSlowConsumer: () => {
        if (role !== 'agent') this.metrics.slowClientCut(channel.transport);
      },
    });
    // Dropped once hello came: an idle connection does not keep a spent timer.
    let helloTimer: ReturnType<typeof setTimeout> | undefined = setTimeout(
      () => channel.close('DEADLINE_EXCEEDED', `no hello within ${this.limits.helloTimeoutMs} ms`),
      this.limits.helloTimeoutMs,
    );
    let greeted = false;
    peer.onRequest('ping', () => ({}));
    peer.onRequest('auth.renew', async ({ token }) => {
      if (!auth) throw new TetherError('FAILED_PRECONDITION', 'this connection has no token to renew (authentication is off)');
      return { expires_at: (await auth.renew(token)).toISOString() };
    });
    peer.onRequest('hello', async (hello) => {
      if (greeted) throw new TetherError('FAILED_PRECONDITION', 'hello was already exchanged on this connection');
      assertCompatible(hello.protocol_version);
      if (principal.kind !== 'any' && principal.kind !== hello.role) {
        const a = (kind: string) => (kind === 'agent' ? 'an agent' : 'a client');
        const message = `token is for ${a(principal.kind)}, not ${a(hello.role)} (${a(hello.role)} needs ${a(hello.role)} token)`;
        throw noteAuthFailure(log.logger, authError('PERMISSION_DENIED', 'wrong_kind', message), {}, this.countAuthFailure);
      }
      if (hello.role === 'agent')
        await this.helloAgent(
          peer,
          principal,
          hello.agent,
          log.logger,
          this.agreed(hello.capabilities, CAPABILITIES.foldedAcks),
          () => greeted,
        );
      else new ClientLink(peer, principal, this.directory, this.metrics, this.agreed(hello.capabilities, CAPABILITIES.joinedReplay));
      role = hello.role;
      greeted = true;
      clearTimeout(helloTimer);
      helloTimer = undefined;
      startHeartbeat(peer, this.limits.heartbeat, (reason) => {
        log.warn({ reason }, 'peer stopped answering; closing its connection');
        channel.close('UNAVAILABLE', reason);
      });
      log.info({ role: hello.role, agent: hello.agent?.name }, 'peer connected');
      return {
        protocol_version: PROTOCOL_VERSION,
        gateway_id: this.id,
        capabilities: this.capabilities,
        principal: principal.sub,
        ...(principal.name ? { principal_name: principal.name } : {}),
        token_expires_at: auth?.expiresAt.toISOString(),
        ...(hello.role === 'client' ? { may: { create: principal.canCreate, control: principal.canControl } } : {}),
      };
    });
    void peer.run().then((info) => {
      clearTimeout(helloTimer);
      this.channels.delete(channel);
      log.info({ code: info.code, reason: info.reason }, 'peer disconnected');
    });
  }

  /** Whether both this gateway and the peer (its hello's `capabilities`) list `capability`. */
  private agreed(peerCapabilities: readonly string[], capability: string): boolean {
    return this.capabilities.includes(capability) && peerCapabilities.includes(capability);
  }

  /** A JSON-RPC dialect client: no hello (its `initialize` is answered by the link); agents cannot use it. */
  private acceptDialect(channel: Channel, principal: Principal, log: Logger): void {
    void channel.closed.then(() => this.channels.delete(channel));
    if (principal.kind === 'agent') {
      noteAuthFailure(
        log,
        authError('PERMISSION_DENIED', 'wrong_kind', 'token is for an agent, not a client (the JSON-RPC dialect is for clients)'),
        {},
        this.countAuthFailure,
      );
      channel.close('PERMISSION_DENIED', 'token is for an agent, not a client');
      return;
    }
    new JsonRpcDialectLink(channel, principal, this.directory, log.child({ dialect: 'jsonrpc' }), {
      slowClientBytes: this.limits.slowClientBytes,
      initTimeoutMs: this.limits.helloTimeoutMs,
      metrics: this.metrics,
    });
    log.info({ dialect: 'jsonrpc' }, 'peer connected');
  }

  /**
   * `foldAcks`: the agent takes output acks folded into agent.input (capability acks.folded.v1).
   * `greeted`: whether another hello finished on this connection meanwhile (a cluster's takeover awaits).
   */
  private async helloAgent(
    peer: RpcPeer,
    principal: Principal,
    agent: AgentDescriptor | undefined,
    log: Logger,
    foldAcks: boolean,
    greeted: () => boolean,
  ): Promise<void> {
    if (!agent) throw new TetherError('INVALID_ARGUMENT', 'an agent hello must describe the agent (params.agent)');
    if (principal.agentName !== undefined && principal.agentName !== agent.name) {
      throw noteAuthFailure(
        log,
        authError(
          'PERMISSION_DENIED',
          'wrong_agent',
          `this token may register only as agent "${principal.agentName}", not "${agent.name}"`,
        ),
        {},
        this.countAuthFailure,
      );
    }
    let fingerprint: string | undefined;
    try {
      fingerprint = await this.hostKeys.admit(principal.sub, agent.name, agent.host_key);
    } catch (err) {
      if (err instanceof TetherError && err.code === 'UNAVAILABLE') throw err; // the cluster's pins cannot be read now: the agent retries
      throw noteAuthFailure(log, authError('PERMISSION_DENIED', 'host_key', (err as Error).message), {}, this.countAuthFailure);
    }
    if (fingerprint) log.info({ agent: agent.name, hostKey: fingerprint }, 'agent proved its host key');
    // In a cluster, the sessions this agent runs that another gateway held are brought here first.
    await this.directory.elsewhere?.beforeAgent(agent);
    if (greeted()) throw new TetherError('FAILED_PRECONDITION', 'hello was already exchanged on this connection');
    const link = new AgentLink(
      agent,
      peer,
      this.directory,
      log.child({ agent: agent.name }),
      principal,
      this.durability,
      this.metrics,
      foldAcks,
    );
    try {
      this.directory.agentUp(link); // refuses another identity's live name; supersedes the same identity's link
    } catch (err) {
      link.dispose(); // a refused link must not relay anything its peer sends later
      if (err instanceof TetherError && err.code === 'ALREADY_EXISTS')
        noteAuthFailure(log, new TetherError(err.code, err.message, { reason: 'agent_taken' }), {}, this.countAuthFailure);
      throw err;
    }
    this.metrics.agentRegistered(agent.name);
    void peer.channel.closed.then(() => this.directory.agentDown(link));
  }

  /** Closes every connection; sessions end when their agents go. */
  async close(): Promise<void> {
    for (const ch of this.channels) ch.close('UNAVAILABLE', 'gateway shutting down');
    this.directory.dispose();
    await Promise.all([...this.channels].map((c) => c.closed));
    this.audit.flush(); // the summaries of the window so far
    this.store.close();
    await this.telemetry?.flush();
  }
}

/** How many items fall under each key. */
function countBy<T>(items: T[], key: (item: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const item of items) out[key(item)] = (out[key(item)] ?? 0) + 1;
  return out;
}
