/**
 * Hand-written checks in front of the zod schemas of the messages every prompt round trip
 * carries (zod costs about as much per message as the rest of their handling). The schemas in
 * core/protocol/methods.ts stay the one definition: a check here says yes only to a value its
 * schema would return unchanged (the same keys, the same values), so the value can be used as
 * it is; it says no to everything else, valid or not, and the schema then decides (its
 * defaults, its errors). test/fast-checks.test.ts holds every check to its schema over
 * generated values, and each table's keys to the method names of methods.ts (this folder lies
 * below core/protocol and does not import it).
 */

/** A check of one method's params: true only where its schema would return them unchanged. */
export type FastCheck = (params: unknown) => boolean;

/** `id` of core/protocol/methods.ts: a string of 1 to 128 UTF-16 units. */
const isId = (v: unknown): v is string => typeof v === 'string' && v.length >= 1 && v.length <= 128;

/** `seq` of methods.ts: a safe integer ≥ 0. */
const isSeq = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** A string of at most `max` UTF-16 units (zod's `.max`). */
const isShort = (v: unknown, max: number): boolean => typeof v === 'string' && v.length <= max;

/**
 * An object JSON.parse made, which zod's record and object schemas copy key for key: its
 * prototype is Object.prototype and it has no own `__proto__` (which zod leaves out).
 */
function isJsonObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype && !Object.hasOwn(v, '__proto__');
}

/** Whether every own key of `v` is one of `keys` (zod's objects drop others: the value would change). */
function onlyKeys(v: Record<string, unknown>, keys: ReadonlySet<string>): boolean {
  for (const k in v) if (!keys.has(k)) return false;
  return true;
}

/** `EngineInput`: any JSON object. */
const isEngineInput = isJsonObject;

/** Immutable tables (never added to), so safe to share as module values. */
const POST_KEYS: ReadonlySet<string> = new Set(['session_id', 'input_id', 'line', 'trace']);
const INPUT_KEYS: ReadonlySet<string> = new Set(['session_id', 'seq', 'line', 'ack', 'trace']);
const OUTPUT_KEYS: ReadonlySet<string> = new Set(['session_id', 'seq', 'meta', 'read_at_ms', 'input_ack', 'trace']);
const TRACE_KEYS: ReadonlySet<string> = new Set(['traceparent', 'tracestate']);
/** `traceparent` of core/protocol/trace-context.ts. */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** `TraceContext` (trace-context.ts): what a message carries while tracing is on. */
function isTraceContext(v: unknown): boolean {
  if (!isJsonObject(v) || !onlyKeys(v, TRACE_KEYS)) return false;
  return typeof v.traceparent === 'string' && TRACEPARENT.test(v.traceparent) && (v.tracestate === undefined || isShort(v.tracestate, 512));
}
const META_KEYS: ReadonlySet<string> = new Set(['type', 'subtype', 'request_id', 'is_error', 'state', 'engine_session_id']);
const FRAME_KEYS: ReadonlySet<string> = new Set(['session_id', 'seq', 'origin', 'event']);
const PROMPT_KEYS: ReadonlySet<string> = new Set(['type', 'subtype', 'principal', 'client_id', 'message', 'input_id', 'uuid', 'at']);

/** The `prompt` event of `TetherEvent` (events.ts): the echo of every prompt (a queued one's `queued` and `priority` go to the schema). */
function isPromptEvent(v: unknown): boolean {
  if (!isJsonObject(v) || !onlyKeys(v, PROMPT_KEYS)) return false;
  return (
    v.type === 'tether' &&
    v.subtype === 'prompt' &&
    typeof v.principal === 'string' &&
    typeof v.client_id === 'string' &&
    'message' in v &&
    (v.input_id === undefined || typeof v.input_id === 'string') &&
    (v.uuid === undefined || typeof v.uuid === 'string') &&
    typeof v.at === 'string'
  );
}

/** `LineMeta` (methods.ts): optional short strings and one optional boolean. */
function isLineMeta(v: unknown): boolean {
  if (!isJsonObject(v) || !onlyKeys(v, META_KEYS)) return false;
  return (
    (v.type === undefined || isShort(v.type, 128)) &&
    (v.subtype === undefined || isShort(v.subtype, 128)) &&
    (v.request_id === undefined || isShort(v.request_id, 256)) &&
    (v.is_error === undefined || typeof v.is_error === 'boolean') &&
    (v.state === undefined || isShort(v.state, 64)) &&
    (v.engine_session_id === undefined || isShort(v.engine_session_id, 256))
  );
}

/** Checks of JSON notifications' params, by method (those a prompt round trip carries). */
export const FAST_NOTIFICATION_CHECKS = {
  'session.post': (p) =>
    isJsonObject(p) &&
    onlyKeys(p, POST_KEYS) &&
    isId(p.session_id) &&
    isId(p.input_id) &&
    isEngineInput(p.line) &&
    (p.trace === undefined || isTraceContext(p.trace)),
  /** A frame carrying the echo of a prompt (frames carrying lines are read without parsing, session-frame.ts). */
  'session.frame': (p) =>
    isJsonObject(p) && onlyKeys(p, FRAME_KEYS) && isId(p.session_id) && isSeq(p.seq) && p.origin === 'gateway' && isPromptEvent(p.event),
  'agent.input': (p) =>
    isJsonObject(p) &&
    onlyKeys(p, INPUT_KEYS) &&
    isId(p.session_id) &&
    isSeq(p.seq) &&
    isEngineInput(p.line) &&
    (p.ack === undefined || isSeq(p.ack)) &&
    (p.trace === undefined || isTraceContext(p.trace)),
} as const satisfies Readonly<Record<string, FastCheck>>;

/** Checks of binary notifications' header params, by method. */
export const FAST_BINARY_CHECKS = {
  'session.output': (p) =>
    isJsonObject(p) &&
    onlyKeys(p, OUTPUT_KEYS) &&
    isId(p.session_id) &&
    isSeq(p.seq) &&
    isLineMeta(p.meta) &&
    (p.read_at_ms === undefined || isSeq(p.read_at_ms)) &&
    (p.input_ack === undefined || isSeq(p.input_ack)) &&
    (p.trace === undefined || isTraceContext(p.trace)),
} as const satisfies Readonly<Record<string, FastCheck>>;
