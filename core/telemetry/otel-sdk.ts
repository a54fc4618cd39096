/**
 * Tracing on: Tether's tracer over the OpenTelemetry SDK, exporting OTLP http/json in batches.
 * The only module that imports OpenTelemetry, and only by the dynamic import in
 * core/telemetry/telemetry.ts (the layering rules hold both). Each program gets a provider of
 * its own, never the global one: several programs share a process in tests, and a library
 * embedded in an application must not take over that application's tracing.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, createTraceState, trace, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resources, tracing } from '@opentelemetry/sdk-node';
import type { TraceContext } from '../protocol/trace-context.js';
import type { TelemetryConfig } from './telemetry.js';
import type { SpanAttributes, SpanRole, Telemetry, TraceSpan, Tracer } from './tracer.js';

const KINDS: Record<SpanRole, SpanKind> = {
  client: SpanKind.CLIENT,
  server: SpanKind.SERVER,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
  internal: SpanKind.INTERNAL,
};

/** Starts one program's tracing: a provider with its service name and a batch exporter to `config.url`. */
export function startOtel(service: string, config: TelemetryConfig): Telemetry {
  const exporter = new OTLPTraceExporter({ url: config.url, headers: config.headers });
  const provider = new tracing.BasicTracerProvider({
    resource: resources.resourceFromAttributes({ 'service.name': service }),
    spanProcessors: [new tracing.BatchSpanProcessor(exporter, { scheduledDelayMillis: config.scheduleDelayMs })],
  });
  const otel = provider.getTracer('tether');
  let stopped: Promise<void> | undefined;
  const tracer: Tracer = {
    start(name, parent, attributes, role = 'internal') {
      const span = otel.startSpan(name, { kind: KINDS[role], attributes: defined(attributes) }, parentContext(parent));
      return new SpanHandle(span);
    },
  };
  return {
    tracer,
    service,
    flush: () => provider.forceFlush(),
    shutdown: () => (stopped ??= provider.shutdown()),
  };
}

class SpanHandle implements TraceSpan {
  readonly context: TraceContext;
  private ended = false;

  constructor(private readonly span: Span) {
    const c = span.spanContext();
    const state = c.traceState?.serialize();
    this.context = {
      traceparent: `00-${c.traceId}-${c.spanId}-${c.traceFlags.toString(16).padStart(2, '0')}`,
      ...(state ? { tracestate: state } : {}),
    };
  }

  set(attributes: SpanAttributes): void {
    this.span.setAttributes(defined(attributes));
  }

  end(error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    if (error !== undefined) {
      // The code only: a message may quote what it refused (a prompt's @-mention, a tool's input).
      const code =
        typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string'
          ? (error as { code: string }).code
          : 'UNKNOWN';
      this.span.setAttribute('tether.error.code', code);
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: code });
    }
    this.span.end();
  }
}

/** A frame's trace context as the parent of a new span (a remote one); none: a new trace. */
function parentContext(parent: TraceContext | undefined) {
  if (!parent) return ROOT_CONTEXT;
  const [, traceId, spanId, flags] = parent.traceparent.split('-');
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16),
    isRemote: true,
    ...(parent.tracestate ? { traceState: createTraceState(parent.tracestate) } : {}),
  });
}

function defined(attributes: SpanAttributes | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(attributes ?? {})) if (v !== undefined) out[k] = v;
  return out;
}
