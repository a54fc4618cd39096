import { TetherError } from '../core/errors.js';
import type { Logger } from '../core/logging.js';
import { INPUT_REFUSED, tetherEvent, type TetherEvent } from '../core/protocol/events.js';
import type { LineMeta } from '../core/protocol/methods.js';
import { checkEngineInput } from '../core/protocol/engine-input.js';
import type { EngineProcess, ExitInfo } from './engine-process.js';
import {
  defaultInitialize,
  isInitializeRequest,
  mergeInitialize,
  NO_CONTRIBUTION,
  type InitializeContribution,
} from './initialize-merge.js';
import { lineMeta } from './line-meta.js';
import { resolvedPaths } from './policy-paths.js';
import type { RelayTraces } from './relay-traces.js';
import type { TraceSpan } from '../core/telemetry/tracer.js';
import type { TraceContext } from '../core/protocol/trace-context.js';

/** One output item waiting for the gateway's ack. */
export type Outgoing =
  | {
      seq: number;
      kind: 'line';
      /** The line exactly as the engine wrote it, without its newline. */
      bytes: Buffer;
      meta: LineMeta;
      /** When the line was read from the engine (epoch ms). */
      readAtMs: number;
      /** Tracing on: the span of the group this line opens (agent/relay-traces.ts). */
      trace?: TraceContext;
    }
  | { seq: number; kind: 'event'; event: TetherEvent };

/** Where a relay sends its output; undefined while the gateway link is down. */
export interface OutputSink {
  send(sessionId: string, item: Outgoing): void;
  /** Every input up to `seq` was written to the engine. */
  ackInput(sessionId: string, seq: number): void;
}

export interface RelayLimits {
  /** Unacked output held for the gateway before the engine is pushed back (64 MiB). */
  maxUnackedBytes: number;
}

export const RELAY_DEFAULTS: RelayLimits = { maxUnackedBytes: 64 * 1024 * 1024 };

/** How a relay initializes its engine (agent/initialize-merge.ts). */
export interface RelayInit {
  /** What the agent merges into every initialize the engine sees. */
  contribution: InitializeContribution;
  /**
   * The client promised its own initialize (session option `client_initialize`): should its
   * first line be something else, the agent's default goes just before it.
   */
  clientInitializes: boolean;
  /**
   * Throws when a client's control request may not reach the engine (core/engine-controls.ts:
   * the owner's allowances); the relay then answers it itself. Absent: every request goes through.
   */
  checkControl?: (request: Record<string, unknown>) => void;
  /**
   * Runs once the engine has exited (not on a hand-over: the session goes on elsewhere); the
   * event it resolves with goes out just before `exited` (the session's worktree removed or kept).
   */
  atEnd?: () => Promise<TetherEvent | undefined>;
}

/** The gateway's numbering a relay continues: its next output seq, and the last input seq the session's engine took. */
export interface RelayStart {
  nextSeq: number;
  lastInputSeq: number;
}

/** A check every input passes before it is written (the agent's @-mention check); throws PERMISSION_DENIED to refuse it. */
export type InputCheck = (line: Record<string, unknown>) => void;

/** The request id the agent uses for its own initialize handshake. */
export const AGENT_INIT_REQUEST_ID = 'tether_agent_init';

/**
 * Engine ⇄ gateway for one session. Numbers every output item where it is read, holds it
 * until the gateway acks it, and stops reading the engine when too much is unacked (so the
 * engine blocks on its pipe instead of anything being dropped). Input is applied at most
 * once per gateway input seq.
 */
/** What a relay needs of its engine: its lines, a way to write to it, and its exit. */
export type RelayEngine = Pick<EngineProcess, 'lines' | 'write' | 'exited'>;

export class SessionRelay<E extends RelayEngine = EngineProcess> {
  private nextSeq = 1;
  /** Why the gateway asked to stop the engine (e.g. `stopped by alice`), for the exited event. */
  stopReason: string | undefined;
  private outbox: Outgoing[] = [];
  private outboxBytes = 0;
  private lastInputSeq = 0;
  private sink: OutputSink | undefined;
  private resumePump: (() => void) | undefined;
  private initWaiter: { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void } | undefined;
  /** Whether an initialize (the agent's or the client's) was written to the engine. */
  private engineInitialized = false;
  /** The engine's own session id (its system/init says it): the transcript's name. */
  engineSessionId: string | undefined;
  /** User messages written to the engine whose turn has not ended (a `result`) yet. */
  private openTurns = 0;
  /** A graceful restart: the first input held back (with every one after it) for the next engine. */
  private heldFrom: number | undefined;
  private holding = false;
  /** The engine stops for a graceful restart: its exit is not reported (the session waits for the next agent). */
  private handingOver = false;
  /** Its spans while tracing is on (set by the agent before the engine's first line); none: off. */
  traces: RelayTraces | undefined;
  readonly done: Promise<ExitInfo>;

  constructor(
    readonly sessionId: string,
    readonly engine: E,
    private readonly log: Logger,
    private readonly limits: RelayLimits = RELAY_DEFAULTS,
    private readonly init: RelayInit = { contribution: NO_CONTRIBUTION, clientInitializes: false },
    private readonly checkInput?: InputCheck,
    /** Where an engine that continues a session (after an agent restart) picks up the session's numbering. */
    start?: RelayStart,
  ) {
    if (start) {
      this.nextSeq = start.nextSeq;
      this.lastInputSeq = start.lastInputSeq;
    }
    this.done = this.pump();
  }

  /** Next seq the gateway should expect (for the hello on reconnect). */
  get nextOutputSeq(): number {
    return this.outbox.length ? this.outbox[0].seq : this.nextSeq;
  }

  /** Highest output seq handed out so far (0 before the first item). */
  get lastSentSeq(): number {
    return this.nextSeq - 1;
  }

  /** Bytes of output sent and not yet acked; the relay stops reading the engine at its limit. */
  get unackedBytes(): number {
    return this.outboxBytes;
  }

  /** Highest gateway input seq written to the engine (for the hello on reconnect). */
  get lastAppliedInputSeq(): number {
    return this.lastInputSeq;
  }

  /** Attaches (or detaches) the gateway link and re-sends everything not yet acked, in order. */
  setSink(sink: OutputSink | undefined): void {
    this.sink = sink;
    if (sink) for (const item of this.outbox) sink.send(this.sessionId, item);
  }

  /** The gateway has everything up to `seq`: release it. */
  ack(seq: number): void {
    if (seq >= this.nextSeq) {
      this.log.warn({ seq, next: this.nextSeq }, 'ignoring ack beyond what was sent');
      return;
    }
    // Find the cut first and splice once: shift() per item is quadratic on a long outbox.
    let n = 0;
    while (n < this.outbox.length && this.outbox[n].seq <= seq) this.outboxBytes -= sizeOf(this.outbox[n++]);
    if (n) this.outbox.splice(0, n);
    if (this.outboxBytes < this.limits.maxUnackedBytes) {
      const r = this.resumePump;
      this.resumePump = undefined;
      r?.();
    }
  }

  /** Whether a turn the engine was given has not ended yet. */
  get turnRunning(): boolean {
    return this.openTurns > 0;
  }

  /**
   * A graceful restart begins: from the first user message on, inputs are neither written nor
   * acknowledged, so the gateway keeps them for the engine the next agent process resumes.
   * What a running turn needs (a permission answer, an interrupt) still goes through.
   */
  holdNewTurns(): void {
    this.holding = true;
  }

  /** The engine is about to stop for a graceful restart: its exit is not reported, so the session is not ended. */
  handOver(): void {
    this.handingOver = true;
  }

  /** Whether everything sent was acked (used to finish shutdown). */
  get drained(): boolean {
    return this.outbox.length === 0;
  }

  /**
   * Sends the agent's own initialize and resolves with the engine's answer (consumed here,
   * not relayed). Rejects if the engine exits first or takes longer than `timeoutMs`.
   */
  initialize(timeoutMs: number): Promise<Record<string, unknown>> {
    const answered = new Promise<Record<string, unknown>>((resolve, reject) => {
      this.initWaiter = { resolve, reject };
      const t = setTimeout(
        () => reject(new TetherError('DEADLINE_EXCEEDED', `engine did not answer initialize within ${timeoutMs} ms`)),
        timeoutMs,
      );
      t.unref();
      void this.done.then((exit) =>
        reject(
          new TetherError(
            'FAILED_PRECONDITION',
            `engine exited during start-up (code ${exit.code}, signal ${exit.signal}): ${exit.stderrTail.trim().slice(-2000) || 'no stderr'}`,
          ),
        ),
      );
    });
    this.writeAgentInitialize().catch((err: Error) => this.initWaiter?.reject(err));
    return answered.finally(() => (this.initWaiter = undefined));
  }

  /** The agent's own initialize; its answer is consumed by the pump, never relayed. */
  private writeAgentInitialize(): Promise<void> {
    this.engineInitialized = true;
    return this.engine.write({
      type: 'control_request',
      request_id: AGENT_INIT_REQUEST_ID,
      request: defaultInitialize(this.init.contribution),
    });
  }

  /**
   * The line as the engine must see it: a client's initialize gets the agent's contribution
   * merged in. A session whose client promised its own initialize but sent something else
   * first gets the agent's default before that line, so no engine runs without it.
   */
  private prepare(line: Record<string, unknown>): Record<string, unknown> {
    if (isInitializeRequest(line)) {
      const first = !this.engineInitialized;
      this.engineInitialized = true;
      return { ...line, request: mergeInitialize(line.request as Record<string, unknown>, this.init.contribution, first) };
    }
    // Written synchronously before the line (stdin writes keep call order); a failure shows on the line's own write.
    if (this.init.clientInitializes && !this.engineInitialized) this.writeAgentInitialize().catch(() => {});
    return line;
  }

  /**
   * Writes one input line unless this gateway seq was already applied. A line the engine
   * cannot take (see checkEngineInput), that the input check refuses, or that cannot be
   * written is reported as an `engine_error` event (code INPUT_REFUSED for a refusal, else
   * INPUT_NOT_WRITTEN) and acknowledged all the same, so the gateway lets it go; it never
   * throws, so one bad input touches neither the agent nor its other sessions.
   */
  async input(seq: number, line: Record<string, unknown>, trace?: TraceContext): Promise<void> {
    if (seq <= this.lastInputSeq) return;
    if (this.holding && (this.heldFrom !== undefined || line.type === 'user')) {
      this.heldFrom ??= seq;
      return;
    }
    this.lastInputSeq = seq;
    let span: TraceSpan | undefined;
    try {
      const text = checkEngineInput(line);
      span = this.traces?.write(seq, line, text.length, trace);
      if (this.refusedControl(line)) {
        span?.set({ 'tether.input.refused': true });
        span?.end();
        return this.sink?.ackInput(this.sessionId, seq);
      }
      this.checkInput?.(line);
      const prepared = this.prepare(line);
      await this.engine.write(prepared, prepared === line ? text : undefined); // serialized once, by the check
      span?.end();
      if (line.type === 'user') this.openTurns++;
    } catch (err) {
      span?.end(err);
      const e = err instanceof TetherError ? err : new TetherError('INTERNAL', String(err));
      const refused = e.code === 'PERMISSION_DENIED';
      this.log.warn({ sessionId: this.sessionId, seq, err: e.message }, refused ? 'input refused' : 'input not written to the engine');
      const uuid = typeof line.uuid === 'string' ? { input_uuid: line.uuid } : {};
      this.emit({
        kind: 'event',
        event: tetherEvent({ subtype: 'engine_error', code: refused ? INPUT_REFUSED : 'INPUT_NOT_WRITTEN', message: e.message, ...uuid }),
      });
    }
    this.sink?.ackInput(this.sessionId, seq);
  }

  /**
   * Defence in depth behind the gateway's own check: a client's control request the owner does
   * not allow never reaches the engine's stdin; the relay answers it in the engine's place (a
   * `control_response` error for its request id), so the asker gets the refusal.
   */
  private refusedControl(line: Record<string, unknown>): boolean {
    if (line.type !== 'control_request' || !this.init.checkControl) return false;
    const request = (typeof line.request === 'object' && line.request !== null ? line.request : {}) as Record<string, unknown>;
    try {
      this.init.checkControl(request);
      return false;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.log.warn(
        { sessionId: this.sessionId, subtype: String(request.subtype).slice(0, 64), err: message },
        'control request refused before the engine',
      );
      const answer = { type: 'control_response', response: { subtype: 'error', request_id: line.request_id, error: message } };
      this.emit({ kind: 'line', bytes: Buffer.from(JSON.stringify(answer)), meta: lineMeta(answer), readAtMs: Date.now() });
      return true;
    }
  }

  /** An event of the agent's own about the session (e.g. its worktree), numbered with the engine's output. */
  note(event: TetherEvent): void {
    this.emit({ kind: 'event', event });
  }

  /** `value`: the line parsed (an engine line), for the names of the tools it calls when traced. */
  private emit(
    item: { kind: 'line'; bytes: Buffer; meta: LineMeta; readAtMs: number } | { kind: 'event'; event: TetherEvent },
    value?: Record<string, unknown>,
  ): void {
    const seq = this.nextSeq++;
    // Built field by field: an object spread here cost more than the rest of emit.
    const full: Outgoing =
      item.kind === 'line'
        ? {
            seq,
            kind: 'line',
            bytes: item.bytes,
            meta: item.meta,
            readAtMs: item.readAtMs,
            trace: this.traces?.line(seq, item.bytes.length, item.meta, value),
          }
        : { seq, kind: 'event', event: item.event };
    this.outbox.push(full);
    this.outboxBytes += sizeOf(full);
    this.sink?.send(this.sessionId, full);
  }

  private async pump(): Promise<ExitInfo> {
    for await (const item of this.engine.lines()) {
      if (item.kind === 'invalid') {
        this.emit({
          kind: 'event',
          event: tetherEvent({ subtype: 'engine_error', code: item.code, message: item.message, preview: item.preview }),
        });
      } else if (isInitAnswer(item.value)) {
        this.initWaiter?.resolve(item.value); // the agent's own handshake: never relayed
      } else {
        const meta = lineMeta(item.value);
        if (meta.type === 'result') this.openTurns = Math.max(0, this.openTurns - 1);
        if (meta.engine_session_id !== undefined) this.engineSessionId = meta.engine_session_id;
        const resolved = meta.subtype === 'hook_callback' ? resolvedPaths(item.value) : undefined;
        if (resolved) meta.resolved = resolved;
        this.emit({ kind: 'line', bytes: item.bytes, meta, readAtMs: Date.now() }, item.value);
      }
      if (this.outboxBytes >= this.limits.maxUnackedBytes) {
        this.log.warn({ sessionId: this.sessionId, unacked: this.outboxBytes }, 'gateway behind; pausing engine output');
        await new Promise<void>((resolve) => (this.resumePump = resolve));
      }
    }
    const exit = await this.engine.exited.catch(
      (err: Error): ExitInfo => ({ code: null, signal: null, stderrTail: err.message }), // never started
    );
    if (this.handingOver) return exit;
    const last = await this.init.atEnd?.();
    if (last && !this.handingOver) this.emit({ kind: 'event', event: last });
    this.emit({
      kind: 'event',
      event: tetherEvent({
        subtype: 'exited',
        code: exit.code,
        signal: exit.signal,
        stderr_tail: exit.stderrTail.slice(-8192),
        ...(this.stopReason ? { reason: this.stopReason } : {}),
      }),
    });
    return exit;
  }
}

function isInitAnswer(v: Record<string, unknown>): boolean {
  const r = v.response as { request_id?: unknown } | undefined;
  return v.type === 'control_response' && r?.request_id === AGENT_INIT_REQUEST_ID;
}

function sizeOf(item: Outgoing): number {
  return item.kind === 'line' ? item.bytes.length + 64 : 256;
}
