import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { SessionState } from '../core/protocol/events.js';
import { PlainHistogram } from './plain-histogram.js';
import { UsageCounters, type UsageMetricsOptions } from './usage/usage-metrics.js';
import type { UsageEntry } from '../core/protocol/usage.js';

/** Which way a relayed frame went, seen from the gateway. */
export const RELAY_DIRECTIONS = ['from_agent', 'to_client', 'from_client', 'to_agent'] as const;
export type RelayDirection = (typeof RELAY_DIRECTIONS)[number];
const DIRECTION_INDEX = Object.fromEntries(RELAY_DIRECTIONS.map((d, i) => [d, i])) as Record<RelayDirection, number>;

/** How a permission prompt (any engine request waiting for a client) was settled. */
export const PROMPT_OUTCOMES = ['allow', 'deny', 'error', 'answered', 'expired', 'cancelled', 'engine_gone', 'overflow'] as const;
export type PromptOutcome = (typeof PROMPT_OUTCOMES)[number];

/** Transports whose series exist from the start (at 0), so rate() and dashboards work before the first event. */
const KNOWN_TRANSPORTS = ['ws', 'grpc'];

/** Live counts read at scrape time, so gauges never drift from the routing state. */
export interface GatewayGaugeSources {
  /** Registered agents by transport. */
  agents(): Record<string, number>;
  /** Sessions the gateway holds, by state. */
  sessions(): Partial<Record<SessionState, number>>;
  /** Client attachments to sessions, by transport. */
  attachments(): Record<string, number>;
}

/** Relay latency buckets: 0.5 ms to 5 s. */
export const RELAY_LATENCY_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** Time-to-decision buckets for permission prompts: 0.5 s to the 10-minute expiry. */
export const PROMPT_DECISION_BUCKETS_SECONDS = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Agent names remembered to tell a reconnect from a first registration. */
const MAX_REMEMBERED_AGENTS = 10_000;

/** Options of {@link GatewayMetrics}. */
export interface GatewayMetricsOptions {
  /** Also export the process's CPU, memory, event-loop and GC metrics (the CLI turns this on). */
  processMetrics?: boolean;
  /** The usage counters' labels: people only when turned on, each label capped. */
  usage?: UsageMetricsOptions;
}

/**
 * The gateway's Prometheus metrics, in a Registry of its own (never prom-client's global
 * one, so any number of gateways can live in one process). Routing code calls the named
 * methods below at the points they describe; each is cheap and synchronous and never throws.
 * Label values come from small fixed sets (directions, outcomes, transports, reasons), never
 * from user input. Scrape with {@link render}.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  private sources: GatewayGaugeSources | undefined;
  private readonly seenAgents = new Set<string>();
  private readonly frames: Counter<'direction'>;
  private readonly bytes: Counter<'direction'>;
  private readonly latency: PlainHistogram;
  private readonly clients: Gauge<'transport'>;
  private readonly promptsRaised: Counter;
  private readonly promptsSettled: Counter<'outcome'>;
  private readonly promptWait: Histogram<'outcome'>;
  private readonly reconnects: Counter;
  private readonly resumes: Counter<'role'>;
  private readonly gaps: Counter;
  private readonly slowCuts: Counter<'transport'>;
  private readonly authFailures: Counter<'reason'>;
  private readonly unresponsive: Counter;
  private readonly connectionsRefused: Counter<'transport'>;
  private readonly usage: UsageCounters;
  private readonly notifications: Counter<'channel' | 'outcome'>;
  /** Frames and bytes relayed since the counters last read them, by RELAY_DIRECTIONS index. */
  private readonly pendingFrames = new Float64Array(RELAY_DIRECTIONS.length);
  private readonly pendingBytes = new Float64Array(RELAY_DIRECTIONS.length);
  /** The frame whose relay latency was observed last (see relayLatency). */
  private lastTimedFrame: object | undefined;

  constructor(opts: GatewayMetricsOptions = {}) {
    const registers = [this.registry];
    const counter = <L extends string = string>(name: string, help: string, labelNames: L[] = []) =>
      new Counter<L>({ name, help, labelNames, registers });
    const histogram = <L extends string = string>(name: string, help: string, buckets: number[], labelNames: L[] = []) =>
      new Histogram<L>({ name, help, buckets, labelNames, registers });
    /** A gauge read at scrape time: `counts` gives its value for each value of its one label. */
    const live = (name: string, help: string, label: string, counts: () => Record<string, number>) =>
      new Gauge({
        name,
        help,
        labelNames: [label],
        registers,
        collect() {
          this.reset();
          for (const [value, n] of Object.entries(counts())) this.set({ [label]: value }, n);
        },
      });
    live(
      'tether_agents_connected',
      'Agents registered with the gateway now, by transport.',
      'transport',
      () => this.sources?.agents() ?? {},
    );
    live('tether_sessions', 'Sessions the gateway holds now, by state (ended ones stay listed for a while).', 'state', () => {
      const counts = this.sources?.sessions() ?? {};
      return Object.fromEntries(SessionState.options.map((state) => [state, counts[state] ?? 0]));
    });
    this.clients = new Gauge({
      name: 'tether_clients_connected',
      help: 'Client connections past their hello, by transport.',
      labelNames: ['transport'],
      registers,
    });
    live(
      'tether_session_attachments',
      'Clients attached to sessions now (one client may attach to several), by transport.',
      'transport',
      () => this.sources?.attachments() ?? {},
    );
    /** Relayed counts reach the counters when they are read (see relayed). */
    const fold = () => this.foldRelayed();
    this.frames = new Counter({
      name: 'tether_relay_frames_total',
      help: 'Frames relayed: from_agent (engine lines and events), to_client (session frames, one per client), from_client (input lines), to_agent (input lines, re-sends included).',
      labelNames: ['direction'],
      registers,
      collect: fold,
    });
    this.bytes = new Counter({
      name: 'tether_relay_bytes_total',
      help: 'Bytes of the frames in tether_relay_frames_total (UTF-8), by direction.',
      labelNames: ['direction'],
      registers,
      collect: fold,
    });
    this.latency = new PlainHistogram(
      'tether_relay_latency_seconds',
      "Engine line read by the agent until the gateway hands it to its clients' connections (live frames, once per frame).",
      RELAY_LATENCY_BUCKETS_SECONDS,
      registers,
    );
    this.promptsRaised = counter(
      'tether_prompts_raised_total',
      'Engine requests (permission prompts, hook callbacks, ...) that waited for a client.',
    );
    this.promptsSettled = counter(
      'tether_prompts_settled_total',
      'Prompts settled, by outcome: allow, deny, error, answered (other answers), expired, cancelled (by the engine), engine_gone, overflow (denied: too many pending).',
      ['outcome'],
    );
    this.promptWait = histogram(
      'tether_prompt_decision_seconds',
      'Time from a prompt being raised to its settlement, by outcome.',
      PROMPT_DECISION_BUCKETS_SECONDS,
      ['outcome'],
    );
    this.reconnects = counter('tether_agent_reconnects_total', 'Agent registrations under a name this gateway has seen before.');
    this.resumes = counter(
      'tether_resumes_total',
      'Resumes: role=agent, a session re-bound to its reconnected agent; role=client, an attach from a given seq.',
      ['role'],
    );
    this.gaps = counter('tether_replay_gaps_total', 'Attaches that asked for history no longer held (a gap notice was sent).');
    this.slowCuts = counter(
      'tether_slow_client_disconnects_total',
      'Clients cut because their send queue passed the limit, by transport.',
      ['transport'],
    );
    this.authFailures = counter(
      'tether_auth_failures_total',
      'Refused credentials, by reason (core/auth/auth-error.ts); reason="rate_limited": refused unread, the address had spent its failures.',
      ['reason'],
    );
    this.connectionsRefused = counter(
      'tether_connections_refused_total',
      'TCP connections ended at once because a connection cap (whole gateway, or one address) was reached, by listener.',
      ['transport'],
    );
    this.notifications = counter(
      'tether_notifications_total',
      'Attention notifications (gateway/attention/), by channel (webhook, push) and outcome: sent, failed (after retries), suppressed (the person had the session open), dropped (a push subscription the push service says is gone).',
      ['channel', 'outcome'],
    );
    this.unresponsive = counter(
      'tether_engine_unresponsive_total',
      'Sessions marked unresponsive: their engine left a control request (e.g. interrupt) unanswered past the bound.',
    );
    for (const direction of RELAY_DIRECTIONS) {
      this.frames.inc({ direction }, 0);
      this.bytes.inc({ direction }, 0);
    }
    for (const outcome of PROMPT_OUTCOMES) {
      this.promptsSettled.inc({ outcome }, 0);
      this.promptWait.zero({ outcome });
    }
    for (const role of ['agent', 'client']) this.resumes.inc({ role }, 0);
    for (const transport of KNOWN_TRANSPORTS) {
      this.clients.set({ transport }, 0);
      this.slowCuts.inc({ transport }, 0);
      this.connectionsRefused.inc({ transport }, 0);
    }
    this.authFailures.inc({ reason: 'rate_limited' }, 0);
    this.usage = new UsageCounters(this.registry, opts.usage);
    if (opts.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** A turn was booked in the usage ledger. */
  turnBooked(entry: UsageEntry): void {
    this.usage.turnBooked(entry);
  }

  /** Where the gauges read live counts from (the Gateway binds its directory once). */
  bindGauges(sources: GatewayGaugeSources): void {
    this.sources = sources;
  }

  /**
   * A frame of `bytes` bytes was relayed in `direction`. Called per frame and per client, so it
   * only adds to plain numbers; the counters take them when they are read.
   */
  relayed(direction: RelayDirection, bytes: number): void {
    const i = DIRECTION_INDEX[direction];
    this.pendingFrames[i]++;
    this.pendingBytes[i] += bytes;
  }

  /** Moves the counts {@link relayed} gathered into the counters (at scrape time). */
  private foldRelayed(): void {
    RELAY_DIRECTIONS.forEach((direction, i) => {
      if (this.pendingFrames[i]) this.frames.inc({ direction }, this.pendingFrames[i]);
      if (this.pendingBytes[i]) this.bytes.inc({ direction }, this.pendingBytes[i]);
      this.pendingFrames[i] = 0;
      this.pendingBytes[i] = 0;
    });
  }

  /**
   * The live engine line of `frame`, read by the agent at `readAtMs` (epoch ms), was just
   * handed to a client connection. Observed once per frame: every client of a session gets the
   * same frame (one Buffer) in one loop, so the clients after the first add nothing to it.
   */
  relayLatency(frame: object, readAtMs: number): void {
    if (frame === this.lastTimedFrame) return;
    this.lastTimedFrame = frame;
    this.latency.observe(Math.max(0, Date.now() - readAtMs) / 1000);
  }

  /** A client finished its hello. */
  clientConnected(transport: string): void {
    this.clients.inc({ transport });
  }

  /** A client's connection closed. */
  clientDisconnected(transport: string): void {
    this.clients.dec({ transport });
  }

  /** The engine asked something a client must answer. */
  promptRaised(): void {
    this.promptsRaised.inc();
  }

  /** A prompt raised `waitedMs` ago was settled. */
  promptSettled(outcome: PromptOutcome, waitedMs: number): void {
    this.promptsSettled.inc({ outcome });
    this.promptWait.observe({ outcome }, Math.max(0, waitedMs) / 1000);
  }

  /** An agent registered; counts a reconnect when this gateway saw the name before. */
  agentRegistered(name: string): void {
    if (this.seenAgents.has(name)) this.reconnects.inc();
    else {
      if (this.seenAgents.size >= MAX_REMEMBERED_AGENTS) this.seenAgents.delete(this.seenAgents.values().next().value as string);
      this.seenAgents.add(name);
    }
  }

  /** A session was resumed by its agent or by a client. */
  resumed(role: 'agent' | 'client'): void {
    this.resumes.inc({ role });
  }

  /** An attach asked for history that is no longer held. */
  replayGap(): void {
    this.gaps.inc();
  }

  /** A client was cut as a slow consumer. */
  slowClientCut(transport: string): void {
    this.slowCuts.inc({ transport });
  }

  /** A credential was refused at the door or at hello. */
  authFailure(reason: string): void {
    this.authFailures.inc({ reason });
  }

  /** A session's engine left a control request unanswered past the bound. */
  engineUnresponsive(): void {
    this.unresponsive.inc();
  }

  /** A TCP connection was ended at a connection cap. */
  connectionRefused(transport: string): void {
    this.connectionsRefused.inc({ transport });
  }

  /** One notification's delivery on `channel` came to `outcome`. */
  notification(channel: NotifyChannel, outcome: NotifyOutcome): void {
    this.notifications.inc({ channel, outcome });
  }

  /** The Prometheus text exposition of every metric, and its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** Where a notification goes. */
export type NotifyChannel = 'webhook' | 'push';
/** How a notification's delivery ended. */
export type NotifyOutcome = 'sent' | 'failed' | 'suppressed' | 'dropped';

/** Normalises a client's decision on a prompt to an outcome label (client text never becomes a label). */
export function outcomeOf(behavior: string): PromptOutcome {
  return behavior === 'allow' || behavior === 'deny' || behavior === 'error' ? behavior : 'answered';
}
