import { z } from 'zod';

/**
 * W3C trace context (https://www.w3.org/TR/trace-context/) as our frames carry it, in the
 * params of the requests and notifications a turn passes through (docs/deploy.md, *Traces*):
 * `traceparent` is `version-traceid-parentid-flags` in lower-case hex, `tracestate` the
 * vendors' list, passed on untouched. Present only while tracing is on.
 */
export const TraceContext = z
  .object({
    traceparent: z
      .string()
      .regex(/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/, 'a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)'),
    tracestate: z.string().max(512).optional(),
  })
  .strict();
export type TraceContext = z.infer<typeof TraceContext>;
