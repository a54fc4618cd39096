/**
 * What Tether's code sees of tracing: a tracer that starts spans under a W3C trace context
 * taken from a frame, and spans whose own context goes into the next frame. The programs hold
 * one only while tracing is on (core/telemetry/telemetry.ts); off, there is none and a call
 * site costs one `undefined` check. Nothing here imports OpenTelemetry: only
 * core/telemetry/otel-sdk.ts does, loaded when tracing starts.
 */
import type { TraceContext } from '../protocol/trace-context.js';

/**
 * A span's attributes: ids, sizes, kinds, tool names, seq numbers. Never prompt text or tool
 * input (docs/security.md): a call site passes only values it made or counted itself.
 */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** How a span relates to the hop it measures (OpenTelemetry's SpanKind, by name). */
export type SpanRole = 'client' | 'server' | 'producer' | 'consumer' | 'internal';

/** One span, started by {@link Tracer.start}. */
export interface TraceSpan {
  /** This span as a parent: what the next frame carries. */
  readonly context: TraceContext;
  /** Adds attributes (e.g. what an answer said) before the end. */
  set(attributes: SpanAttributes): void;
  /** Ends the span once (later calls do nothing); `error`: the call failed, its code is kept (never its message). */
  end(error?: unknown): void;
}

export interface Tracer {
  /** Starts a span, child of `parent` (a frame's trace context) or the root of a new trace. */
  start(name: string, parent: TraceContext | undefined, attributes?: SpanAttributes, role?: SpanRole): TraceSpan;
}

/** A program's tracing while it is on: its tracer, and how to send what it holds before exit. */
export interface Telemetry {
  readonly tracer: Tracer;
  readonly service: string;
  /** Exports every ended span now; resolves when the collector answered (or the export failed). */
  flush(): Promise<void>;
  /** Flushes and stops: later spans are dropped. Idempotent. */
  shutdown(): Promise<void>;
}

/**
 * The trace a synchronous piece of work runs under, for code it calls that has no parameter
 * for it (the gateway's input path from a client's call down to `agent.input`). JavaScript
 * runs one such piece at a time, so one slot per program is exact; never held across an await.
 */
export class TraceSlot {
  current: TraceContext | undefined;

  /** Runs `fn` with `trace` as the current trace, and puts back the one before. */
  run<T>(trace: TraceContext | undefined, fn: () => T): T {
    const before = this.current;
    this.current = trace;
    try {
      return fn();
    } finally {
      this.current = before;
    }
  }
}
