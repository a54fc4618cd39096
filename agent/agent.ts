import type { KeyObject } from 'node:crypto';
import { statSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import { resolve as resolvePath } from 'node:path';
import { hostKeyProof } from '../core/auth/host-key.js';
import { TetherError } from '../core/errors.js';
import { Link, type LinkStatus } from '../core/link/link.js';
import { standardDialers, type DialOptions, type Dialers } from '../core/link/dial.js';
import type { GatewayTargets } from '../core/link/gateway-urls.js';
import { silentLogger, type Logger } from '../core/logging.js';
import type { ParamsOf } from '../core/protocol/methods.js';
import type { EngineKind, SessionOptions } from '../core/protocol/session-options.js';
import { CAPABILITIES, PROTOCOL_VERSION } from '../core/protocol/version.js';
import type { RpcPeer } from '../core/rpc/peer.js';
import { AGENT_BACKOFF, type BackoffPolicy } from '../core/util/backoff.js';
import type { HeartbeatOptions } from '../core/link/heartbeat.js';
import type { TokenSource } from '../core/link/token-renewal.js';
import { isAcpKind } from './acp-engine/presets.js';
import { engineCommandLine, resolveEngines, type EngineChoice, type ResolvedEngines } from './engine-command.js';
import { withSdkEnv } from '../core/protocol/sdk-env.js';
import { ENGINE_START_TIMEOUT_MS } from '../core/timeouts.js';
import { EngineProcess } from './engine-process.js';
import { EngineSet } from './engine-set.js';
import { engineEnvironment, traceEnv, type EngineEnvPolicy } from './engine-env.js';
import { RelayTraces } from './relay-traces.js';
import type { Telemetry, Tracer } from '../core/telemetry/tracer.js';
import type { TraceContext } from '../core/protocol/trace-context.js';
import { checkExtraArgs, type EngineFlagPolicy } from './extra-args.js';
import { checkControl, setCwdTarget, type EngineControlAllowance } from '../core/engine-controls.js';
import { probeEngineVersions } from './engine-version.js';
import { NO_CONTRIBUTION } from './initialize-merge.js';
import { POLICY_CONTRIBUTION } from './policy-hook.js';
import type { SpawnPolicy } from '../core/policy/hook.js';
import { SessionRelay, type OutputSink, type RelayStart } from './session-relay.js';
import { DeferredInputAcks } from './input-acks.js';
import { checkSessionFolder } from './session-roots.js';
import { createWorktree, endWorktree, folderInWorktree } from './worktree.js';
import { tetherEvent } from '../core/protocol/events.js';
import { readTranscript, writeTranscript } from './transcript.js';
import { checkMentionsAt, type MentionScope } from './mention-check.js';
import { viewFolder } from './folder-view/folder-view.js';

/** How long a new engine has to answer the agent's initialize, unless initializeTimeoutMs says otherwise (core/timeouts.ts orders it). */
export const AGENT_INITIALIZE_TIMEOUT_MS = ENGINE_START_TIMEOUT_MS;

/** What the agent offers in its hello: only what it reads back in the gateway's answer. */
export const AGENT_CAPABILITIES: readonly string[] = [CAPABILITIES.foldedAcks];

export interface AgentOptions {
  /** The gateway URL, or several (gateways of one cluster): the agent fails over between them. */
  gateway: GatewayTargets;
  name: string;
  token?: string;
  /** Where a fresh token comes from instead of `token` (e.g. re-reading --token-file): each reconnect, and renewal before expiry. */
  tokenSource?: TokenSource;
  /** The engines sessions may choose, the first by default (agent/engine-command.ts `resolveEngines`). */
  engine?: EngineChoice | readonly EngineChoice[];
  engineCommand?: string;
  /** Working folder for sessions that name none. */
  cwd?: string;
  labels?: Record<string, string>;
  /** Extra environment for engines (e.g. HOME, ANTHROPIC_BASE_URL in tests). */
  engineEnv?: NodeJS.ProcessEnv;
  /** What engines inherit beyond that (agent/engine-env.ts); the agent's token is always withheld. */
  engineEnvPolicy?: EngineEnvPolicy;
  /** Flags beyond the safe ones sessions may ask for (agent/extra-args.ts). */
  engineFlags?: EngineFlagPolicy;
  /** Control requests beyond the safe ones sessions may send (core/engine-controls.ts). */
  engineControls?: EngineControlAllowance;
  /** Folders sessions may work in (and below); empty or absent: anywhere. */
  sessionRoots?: readonly string[];
  /**
   * Folders a prompt's @-mentions may name beyond the session's folder and `sessionRoots`
   * (agent/mention-check.ts); `/`: anywhere. Default: none.
   */
  mentionRoots?: readonly string[];
  /** The agent's host key: each hello proves it holds it (core/auth/host-key.ts). */
  hostKey?: KeyObject;
  dial?: DialOptions;
  /** The transports the agent may dial; default: a new standardDialers(). */
  dialers?: Dialers;
  /** Where its engines are tracked so the program can kill them as it exits; default: a set of its own. */
  engineSet?: EngineSet;
  backoff?: BackoffPolicy;
  /** Liveness pings on the gateway link (default every 15 s, dead after 10 s). */
  heartbeat?: HeartbeatOptions;
  logger?: Logger;
  /** Engine stop graces (stdin EOF → SIGTERM → SIGKILL). */
  eofGraceMs?: number;
  termGraceMs?: number;
  initializeTimeoutMs?: number;
  onStatus?: (status: LinkStatus) => void;
  /** Tracing while it is on (core/telemetry/, started by the program); its spans are flushed at shutdown. */
  telemetry?: Telemetry;
}

/**
 * The agent on a build machine: dials out to the gateway, registers, spawns one engine per
 * session on request and relays its lines both ways. Engines outlive a dropped link; their
 * output waits (bounded) and is re-sent after the reconnect.
 */
export class Agent {
  readonly engines: ResolvedEngines;
  private readonly relays = new Map<string, SessionRelay>();
  /** Where each session's engine keeps its transcript: its folder and HOME. */
  private readonly places = new Map<string, { cwd: string; home: string }>();
  private readonly link: Link;
  private readonly log: Logger;
  private sink: OutputSink | undefined;
  private stopping = false;
  /** The owner's engine environment policy, with the agent's token always among the secrets. */
  private readonly envPolicy: EngineEnvPolicy;
  private readonly engineSet: EngineSet;
  /** Each engine's `--version` line, learned once at start and reported in the hello. */
  private engineVersions: Partial<Record<EngineKind, string>> = {};

  constructor(private readonly opts: AgentOptions) {
    this.log = opts.logger ?? silentLogger;
    this.engines = resolveEngines(opts.engine ?? 'auto', opts.engineCommand);
    this.engineSet = opts.engineSet ?? new EngineSet();
    this.envPolicy = { ...opts.engineEnvPolicy, secrets: [...(opts.engineEnvPolicy?.secrets ?? []), opts.token] };
    this.link = new Link({
      url: opts.gateway,
      dialers: opts.dialers ?? standardDialers(),
      dial: { ...opts.dial, token: opts.token },
      logger: this.log,
      backoff: opts.backoff ?? AGENT_BACKOFF,
      heartbeat: opts.heartbeat,
      tokenSource: opts.tokenSource,
      hello: () => this.hello(),
      setup: (peer) => this.setup(peer),
      onConnected: (peer, hello) => this.connected(peer, hello.capabilities.includes(CAPABILITIES.foldedAcks)),
      onStatus: (s) => {
        if (s.state !== 'connected') this.setSink(undefined);
        opts.onStatus?.(s);
      },
    });
  }

  /** Learns the engines' versions, connects; resolves after the first registration, rejects if it cannot happen. */
  async start(): Promise<void> {
    this.engineVersions = await probeEngineVersions(this.engines, engineEnvironment({ ...this.opts.engineEnv }, this.envPolicy));
    return this.link.start();
  }

  get sessionCount(): number {
    return this.relays.size;
  }

  private hello(): ParamsOf<'hello'> {
    return {
      protocol_version: PROTOCOL_VERSION,
      role: 'agent',
      capabilities: [...AGENT_CAPABILITIES],
      agent: {
        name: this.opts.name,
        host: hostname(),
        engines: this.engines.engines,
        default_engine: this.engines.defaultEngine,
        labels: this.opts.labels ?? {},
        engine_versions: this.engineVersions,
        allows_bypass_permissions: this.opts.engineFlags?.allowBypassPermissions === true,
        sessions: [...this.relays.values()].map((r) => ({
          session_id: r.sessionId,
          next_seq: r.nextOutputSeq,
          last_input_seq: r.lastAppliedInputSeq,
        })),
        host_key: this.opts.hostKey && hostKeyProof(this.opts.hostKey, this.opts.name),
        allow_engine_controls: [...(this.opts.engineControls?.allowControls ?? [])],
      },
    };
  }

  private setup(peer: RpcPeer): void {
    peer
      .onRequest('agent.spawn', (p) => {
        const start = p.continue_at && { nextSeq: p.continue_at.next_seq, lastInputSeq: p.continue_at.last_input_seq };
        const tracer = this.opts.telemetry?.tracer;
        const span = tracer?.start(
          'tether.agent.spawn',
          p.trace,
          { 'tether.session_id': p.session_id, 'tether.engine': p.engine },
          'server',
        );
        const spawned = this.spawn(
          p.session_id,
          p.engine ?? this.engines.defaultEngine,
          p.options,
          peer,
          { hook: p.policy_hook === true, roots: p.policy_roots },
          start,
          p.transcript,
          span && tracer && { tracer, spawn: span.context },
        );
        if (span)
          spawned.then(
            (r) => {
              span.set({ 'tether.engine.pid': r.pid });
              span.end();
            },
            (err: unknown) => span.end(err),
          );
        return spawned;
      })
      .onRequest('agent.export', (p) => this.exportSession(p.session_id))
      .onRequest('agent.folder', (p) => {
        const place = this.places.get(p.session_id);
        if (!place) throw new TetherError('NOT_FOUND', `no session ${p.session_id} on this agent`);
        return viewFolder({ cwd: place.cwd, roots: this.opts.sessionRoots ?? [] }, p.query);
      })
      .onRequest('agent.stop', async (p) => {
        const relay = this.relays.get(p.session_id);
        if (!relay) throw new TetherError('NOT_FOUND', `no session ${p.session_id} on this agent`);
        relay.stopReason ??= p.reason; // said in the exited event, so every member reads who stopped it
        await relay.engine.stop(p.signal).catch(() => {}); // an engine that never started is stopped already
        return {};
      })
      .onNotification('agent.input', (p) => {
        if (p.ack !== undefined) this.acked(p.session_id, p.ack);
        void this.relays.get(p.session_id)?.input(p.seq, p.line, p.trace);
      })
      .onNotification('session.ack', (p) => this.acked(p.session_id, p.seq));
  }

  /** The gateway holds the session's output up to `seq` (a session.ack, or one folded into agent.input). */
  private acked(sessionId: string, seq: number): void {
    const relay = this.relays.get(sessionId);
    relay?.ack(seq);
    if (relay?.drained && relay.engine.hasExited) {
      this.relays.delete(sessionId);
      this.places.delete(sessionId);
    }
  }

  /** `foldAcks`: the gateway folds acks both ways (capability acks.folded.v1): ours ride on our output. */
  private connected(peer: RpcPeer, foldAcks: boolean): void {
    const ackAlone = (sessionId: string, seq: number) => {
      peer.notify('session.input_ack', { session_id: sessionId, seq }).catch(() => {}); // the hello carries it after a reconnect
    };
    const acks = foldAcks ? new DeferredInputAcks(ackAlone) : undefined;
    if (acks) void peer.channel.closed.then(() => acks.dispose());
    this.setSink({
      send: (sessionId, item) => {
        const input_ack = acks?.take(sessionId);
        // Either way the item stays in the relay's outbox until acked, and is re-sent after a reconnect.
        if (item.kind === 'line')
          peer.postBinary(
            'session.output',
            { session_id: sessionId, seq: item.seq, meta: item.meta, read_at_ms: item.readAtMs, input_ack, trace: item.trace },
            item.bytes,
          );
        else peer.notify('session.event', { session_id: sessionId, seq: item.seq, event: item.event, input_ack }).catch(() => {});
      },
      ackInput: (sessionId, seq) => (acks ? acks.note(sessionId, seq) : ackAlone(sessionId, seq)),
    });
  }

  private setSink(sink: OutputSink | undefined): void {
    this.sink = sink;
    for (const relay of this.relays.values()) relay.setSink(sink);
  }

  /**
   * Starts one engine for `peer`'s request. The relay is registered at once, so a hello sent
   * while the engine starts (the link dropped meanwhile) lists it and the gateway can bind it.
   * `start`: the engine continues a session whose engine died with an earlier agent process
   * (its transcript named by `options.resume`), so its relay continues the session's numbering.
   */
  private async spawn(
    sessionId: string,
    kind: EngineKind,
    options: SessionOptions,
    peer: RpcPeer,
    policy: SpawnPolicy,
    start?: RelayStart,
    transcript?: { engine_session_id: string; jsonl: string },
    /** Tracing on: the tracer, and the spawn's span (the engine's TRACEPARENT, the parent of its first output). */
    traced?: { tracer: Tracer; spawn: TraceContext },
  ) {
    if (this.stopping) throw new TetherError('UNAVAILABLE', 'agent is shutting down');
    if (this.relays.has(sessionId)) throw new TetherError('ALREADY_EXISTS', `session ${sessionId} already runs here`);
    if (!this.engines.engines.includes(kind)) throw new TetherError('FAILED_PRECONDITION', `this agent cannot run engine "${kind}"`);
    if (options.client_initialize && isAcpKind(kind))
      throw new TetherError(
        'FAILED_PRECONDITION',
        `engine "${kind}" speaks ACP: a client that brings its own initialize (the SDK drop-in tether-claude, remoteSpawn) needs the claude engine`,
      );
    const folder = resolvePath(options.cwd ?? this.opts.cwd ?? process.cwd());
    let cwd = folder;
    if (!isDirectory(cwd)) throw new TetherError('INVALID_ARGUMENT', `working folder ${cwd} does not exist on agent "${this.opts.name}"`);
    checkSessionFolder(cwd, this.opts.sessionRoots ?? [], this.opts.name);
    if (policy.roots) checkSessionFolder(cwd, policy.roots.folders, this.opts.name, `policy rule: ${policy.roots.rule}`); // the gateway checked the path as written; this follows symlinks
    const flags = this.opts.engineFlags ?? {};
    const extra = checkExtraArgs(options.extra_args ?? [], flags, this.opts.name);
    const { command, args } = engineCommandLine(kind, this.engines, options, extra, flags, this.opts.name);
    const log = this.log.child({ sessionId, engine: kind });
    const user = { uid: this.opts.engineEnvPolicy?.user?.uid, gid: this.opts.engineEnvPolicy?.user?.gid };
    // The engine works in the session's own worktree; an engine continuing the session (after an agent restart) finds it there.
    const place = { roots: this.opts.sessionRoots ?? [], agent: this.opts.name, user };
    const made =
      options.worktree === undefined ? undefined : await createWorktree(folder, sessionId, options.worktree, place, start !== undefined);
    const worktree = made?.worktree;
    if (worktree) {
      cwd = folderInWorktree(worktree, folder);
      if (policy.roots) checkSessionFolder(cwd, policy.roots.folders, this.opts.name, `policy rule: ${policy.roots.rule}`);
      if (this.relays.has(sessionId)) throw new TetherError('ALREADY_EXISTS', `session ${sessionId} already runs here`);
    }
    // The SDK's switches only when the client asked (core/protocol/sdk-env.ts), none inherited;
    // the trace context is the spawn's unless the client's app gave its own (an SDK's TRACEPARENT).
    const env = engineEnvironment(
      withSdkEnv({ ...this.opts.engineEnv }, { ...traceEnv(traced?.spawn), ...options.env }),
      this.envPolicy,
      withSdkEnv(process.env, undefined),
    );
    const home = env.HOME ?? homedir();
    // A session moved here: its transcript goes where this engine looks for it (`--resume` in options).
    if (transcript) writeTranscript(home, cwd, transcript.engine_session_id, transcript.jsonl);
    const engine = EngineProcess.spawn({
      command,
      args,
      cwd,
      env,
      uid: user.uid,
      gid: user.gid,
      eofGraceMs: this.opts.eofGraceMs,
      termGraceMs: this.opts.termGraceMs,
      logger: log,
      engineSet: this.engineSet,
    });
    const scope: MentionScope = {
      cwd,
      roots: [...(this.opts.sessionRoots ?? []), ...(this.opts.mentionRoots ?? [])],
      home: env.HOME,
      judgedAsWritten: policy.hook === true,
      agent: this.opts.name,
    };
    const relayInit = {
      contribution: policy.hook ? POLICY_CONTRIBUTION : NO_CONTRIBUTION,
      clientInitializes: options.client_initialize === true,
      checkControl: (request: Record<string, unknown>) => {
        checkControl(request, this.opts.engineControls ?? {}, this.opts.name);
        const to = setCwdTarget(request); // a move is held where a create's cwd is, symlinks followed
        if (to === undefined) return;
        if (!isDirectory(to))
          throw new TetherError('INVALID_ARGUMENT', `set_cwd: folder ${to} does not exist on agent "${this.opts.name}"`);
        checkSessionFolder(to, this.opts.sessionRoots ?? [], this.opts.name);
        if (policy.roots) checkSessionFolder(to, policy.roots.folders, this.opts.name, `policy rule: ${policy.roots.rule}`);
      },
      atEnd: worktree && (async () => tetherEvent({ subtype: 'worktree', worktree: await endWorktree(worktree, user) })),
    };
    const relay = new SessionRelay(sessionId, engine, log, undefined, relayInit, (line) => checkMentionsAt(line, scope), start);
    if (traced) relay.traces = new RelayTraces(traced.tracer, sessionId, traced.spawn);
    this.relays.set(sessionId, relay);
    this.places.set(sessionId, { cwd, home });
    if (made?.created) relay.note(tetherEvent({ subtype: 'worktree', worktree: made.worktree }));
    try {
      if (options.client_initialize) {
        // The client's own initialize is the engine's one (agent/initialize-merge.ts); a CLI
        // that refuses to start reports through the `exited` event, as a local one would.
        relay.setSink(this.sink);
        return { pid: engine.pid, engine: kind, engine_version: this.engineVersions[kind] };
      }
      const init = await relay.initialize(this.opts.initializeTimeoutMs ?? AGENT_INITIALIZE_TIMEOUT_MS);
      relay.setSink(this.sink);
      const version = (init.response as { response?: { claude_code_version?: unknown } } | undefined)?.response?.claude_code_version;
      return { pid: engine.pid, engine: kind, engine_version: typeof version === 'string' ? version : undefined };
    } catch (err) {
      engine.kill();
      // Asked on a link that is gone: a later hello may have listed this engine, so the relay
      // stays until its exit event is acked, and the gateway learns how it ended.
      if (this.link.peer === peer && !peer.channel.isClosed) this.relays.delete(sessionId);
      throw err;
    }
  }

  /**
   * A move to another agent (session.move): at a turn boundary (else FAILED_PRECONDITION), reads
   * the engine's transcript, then stops the engine without reporting its exit (the session goes
   * on at the other agent). Resolves with the transcript once the engine has stopped.
   */
  private async exportSession(sessionId: string): Promise<{ engine_session_id: string; jsonl: string }> {
    const relay = this.relays.get(sessionId);
    const place = this.places.get(sessionId);
    if (!relay || !place) throw new TetherError('NOT_FOUND', `no session ${sessionId} on this agent`);
    if (relay.turnRunning) throw new TetherError('FAILED_PRECONDITION', 'a turn is running; a session moves between turns');
    if (!relay.engineSessionId)
      throw new TetherError('FAILED_PRECONDITION', 'the engine has run no turn yet: there is no transcript to move');
    const jsonl = readTranscript(place.home, place.cwd, relay.engineSessionId);
    relay.holdNewTurns();
    relay.handOver();
    await relay.engine.stop().catch(() => {});
    if (relay.drained) this.relays.delete(sessionId);
    return { engine_session_id: relay.engineSessionId, jsonl };
  }

  /**
   * A graceful restart (`tether agent --drain-ms`, on SIGTERM): new sessions are refused, inputs
   * that would start a turn stay at the gateway, running turns may finish for up to `limitMs`;
   * then the engines stop without ending their sessions, the gateway gets up to `flushMs` to ack
   * what they wrote, and the link closes. The next agent process of this identity resumes each
   * session on its transcript (docs/protocol.md, "A session across agent restarts and moves"). Idempotent.
   */
  async drain(limitMs: number, flushMs = 10_000): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    const relays = [...this.relays.values()];
    for (const r of relays) r.holdNewTurns();
    const deadline = Date.now() + limitMs;
    while (relays.some((r) => r.turnRunning) && Date.now() < deadline) await sleep(50);
    this.log.info(
      { sessions: relays.length, cutShort: relays.filter((r) => r.turnRunning).length },
      'handing sessions to the next agent process',
    );
    for (const r of relays) r.handOver();
    await this.stopAndFlush(flushMs);
  }

  /**
   * Graceful stop: refuse new sessions, stop every engine (staged), give the gateway up to
   * `flushMs` to ack what they wrote, then close the link. Idempotent.
   */
  async shutdown(flushMs = 10_000): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    await this.stopAndFlush(flushMs);
  }

  /** Stops every engine (staged), waits up to `flushMs` for the gateway to ack their output, closes the link. */
  private async stopAndFlush(flushMs: number): Promise<void> {
    await Promise.allSettled([...this.relays.values()].map((r) => r.engine.stop()));
    const deadline = Date.now() + flushMs;
    while ([...this.relays.values()].some((r) => !r.drained) && this.link.peer && Date.now() < deadline) await sleep(50);
    await this.link.close();
    await this.opts.telemetry?.flush();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
