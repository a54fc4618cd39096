import { asTetherError, JSONRPC_INVALID_REQUEST, TetherError, type ErrorCode } from '../errors.js';
import { readMessage, type RpcErrorObject, type RpcId } from './envelope.js';

/**
 * The one JSON-RPC 2.0 engine: parse, dispatch, correlate and bound, for the native protocol
 * (core/rpc/peer.ts over a Channel), the JSON-RPC dialect (gateway/dialects/jsonrpc/link.ts)
 * and the web page (client/web/src/rpc.ts over a browser WebSocket). It runs in Node and in
 * the browser alike: it imports nothing of Node, and no zod (a zod schema is one {@link Schema}).
 */

/**
 * Where the engine writes: a Channel is one; the web page wraps its WebSocket. Receiving is
 * the owner's: it hands each text frame to {@link RpcEngine.receive} and calls
 * {@link RpcEngine.end} once the connection is gone.
 */
export interface RpcTransport {
  readonly isClosed: boolean;
  /** Bytes handed to the transport but not yet written: what the slow-consumer rule weighs. */
  readonly bufferedBytes: number;
  /** Largest frame, in UTF-8 bytes, the peer takes (Infinity when the far side bounds it). */
  readonly maxFrameBytes: number;
  /** Hands over one text frame; resolves when handed over, rejects (TetherError) when refused. */
  send(text: string): Promise<void>;
  /** The same without a promise: false, having sent nothing, when closed or the frame is over the limit. */
  post(text: string): boolean;
  close(code: ErrorCode, reason: string): void;
}

/** What the engine logs through: pino's Logger is one; silent unless given. */
export interface RpcLog {
  debug(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** What the engine asks of a params schema: zod's `safeParse` (a zod schema is one). */
export interface Schema<T = unknown> {
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: SchemaError };
}

/** A schema's refusal: what {@link describeIssues} reads. */
export interface SchemaError {
  issues: readonly { path: readonly PropertyKey[]; message: string }[];
}

/** The value a schema returns for what it accepts. */
export type SchemaOutput<S> = S extends { safeParse(value: unknown): infer R }
  ? Extract<R, { success: true }> extends { data: infer T }
    ? T
    : never
  : never;

/** A method table: each name this side reads, with the schema of its params. */
export type MethodTable = Record<string, Schema>;

/** A handler's answer that is sent later, through {@link RpcEngine.respond} or {@link RpcEngine.fail}. */
export const LATER: unique symbol = Symbol('answered later');

type RequestHandler = (params: unknown, id: RpcId) => unknown;
type NotificationHandler = (params: unknown) => void;

/**
 * Handlers shared by every connection of one kind (a class's method table, defined once):
 * each gets the connection's own object as `self`. What a gateway serves on thousands of
 * connections costs one table instead of a closure and a map entry per method per connection.
 */
export interface SharedHandlers<T> {
  readonly requests?: Readonly<Record<string, (self: T, params: never, id: RpcId) => unknown>>;
  readonly notifications?: Readonly<Record<string, (self: T, params: never) => void>>;
}

/** The reason every connection over its outbound budget is cut with (RESOURCE_EXHAUSTED, WebSocket close 4008, gRPC status 8). */
export const SLOW_CONSUMER_REASON = 'slow consumer: send queue over limit; resume from your last seq';

/** How long an outgoing request waits for its answer unless told otherwise. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export interface RpcEngineOptions<M extends MethodTable, N extends MethodTable> {
  /** The requests this side may serve. A name not here is UNIMPLEMENTED (-32601); one here without a handler FAILED_PRECONDITION. */
  methods: M;
  /** The notifications this side reads; others go to `otherNotification`, or are ignored. */
  notifications?: N;
  /** Checks in front of notification schemas that say yes only to params their schema would return unchanged (core/wire/fast-checks.ts). */
  fastChecks?: Partial<Record<string, (params: unknown) => boolean>>;
  /** Notifications not in the table (the web page hands every one to its views). Default: ignored. */
  otherNotification?: (method: string, params: unknown) => void;
  /** Completes "M is not available on this connection (…)": what the peer must do first. */
  unavailableHint?: string;
  /** Bound on every outgoing request (default {@link DEFAULT_REQUEST_TIMEOUT_MS}); 0 means none. */
  requestTimeoutMs?: number;
  /** Ids of outgoing requests: numbers from 1, or this prefix and a number ("g-7"). */
  idPrefix?: string;
  /**
   * Outbound budget, in bytes the transport holds but has not yet written. Once it holds more,
   * the next send closes it RESOURCE_EXHAUSTED with {@link SLOW_CONSUMER_REASON} instead of
   * queueing more: a peer that stops reading cannot grow our memory past the budget plus what
   * one turn of the event loop sends it. Default: none.
   */
  maxBufferedBytes?: number;
  /** Called once, with the bytes held, when the budget cuts the connection. */
  onSlowConsumer?: (bufferedBytes: number) => void;
  /** Called with every frame the engine handed to the transport (metrics). */
  onPosted?: (text: string) => void;
  logger?: RpcLog;
}

const silent: RpcLog = { debug() {}, warn() {}, error() {} };

interface Pending {
  resolve: (result: unknown) => void;
  reject: (err: TetherError) => void;
  timer?: ReturnType<typeof setTimeout>;
}

/**
 * JSON-RPC 2.0 over one transport, generic over its method tables. Inbound messages are handled
 * in arrival order (the synchronous part of each handler runs before the next message is looked
 * at); a handler's promise does not hold up later messages. Bad JSON, bad envelopes, unknown
 * methods and bad params get typed errors (core/errors.ts), unknown notifications are ignored,
 * and the connection stays usable after any bad message.
 */
export class RpcEngine<M extends MethodTable = MethodTable, N extends MethodTable = MethodTable> {
  private nextId = 1;
  // Made on first use (pending: dropped again when empty), so an idle connection holds none.
  private pending: Map<RpcId, Pending> | undefined;
  private requestHandlers: Map<string, RequestHandler> | undefined;
  private notificationHandlers: Map<string, NotificationHandler> | undefined;
  private shared: SharedHandlers<unknown> | undefined;
  private sharedSelf: unknown;
  private readonly log: RpcLog;
  private readonly timeoutMs: number;
  readonly maxBufferedBytes: number;

  constructor(
    private readonly transport: RpcTransport,
    private readonly opts: RpcEngineOptions<M, N>,
  ) {
    this.log = opts.logger ?? silent;
    this.timeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.maxBufferedBytes = opts.maxBufferedBytes ?? Infinity;
  }

  /**
   * Serves `method`: the handler gets its params as the table's schema returns them, and the
   * request's id. Its value (or promise) is the result (undefined: `{}`); what it throws is the
   * error; {@link LATER} means the owner answers later.
   */
  handle<K extends keyof M & string>(method: K, handler: (params: SchemaOutput<M[K]>, id: RpcId) => unknown): this {
    (this.requestHandlers ??= new Map()).set(method, handler as RequestHandler);
    return this;
  }

  /**
   * Serves the requests and notifications of `table` with `self` as their first argument.
   * One table per engine (a second replaces it); a handler given to {@link handle} or
   * {@link onNotification} for the same name goes first.
   */
  serve<T>(table: SharedHandlers<T>, self: T): this {
    this.shared = table as SharedHandlers<unknown>;
    this.sharedSelf = self;
    return this;
  }

  /** Reads notification `name`; params its schema refuses are dropped (and logged). */
  onNotification<K extends keyof N & string>(name: K, handler: (params: SchemaOutput<N[K]>) => void): this {
    (this.notificationHandlers ??= new Map()).set(name, handler as NotificationHandler);
    return this;
  }

  /** Requests sent and not yet answered. */
  get pendingCount(): number {
    return this.pending?.size ?? 0;
  }

  // ---- inbound -----------------------------------------------------------------------------

  /** Handles one text frame from the peer. Never throws. */
  receive(text: string): void {
    const msg = readMessage(text);
    switch (msg.kind) {
      case 'invalid':
        return this.reply(null, { code: msg.code, message: msg.message, data: { code: 'INVALID_ARGUMENT' } });
      case 'response':
        return this.settle(msg.id, msg.result, msg.error);
      case 'notification':
        return this.onNotificationMessage(msg.method, msg.params);
      case 'request':
        return this.onRequest(msg.id, msg.method, msg.params);
    }
  }

  /** Answers a frame that is no JSON-RPC message of this connection (-32600 Invalid Request, id null). */
  refuse(why: string): void {
    this.reply(null, { code: JSONRPC_INVALID_REQUEST, message: `invalid request: ${why}`, data: { code: 'INVALID_ARGUMENT' } });
  }

  private onRequest(id: RpcId, method: string, params: unknown): void {
    // Own properties only: `__proto__`, `toString` and the like are unknown methods.
    const schema = Object.hasOwn(this.opts.methods, method) ? this.opts.methods[method] : undefined;
    if (!schema) return this.fail(id, new TetherError('UNIMPLEMENTED', `unknown method: ${method}`));
    const handler = this.requestHandlers?.get(method) ?? this.sharedRequest(method);
    if (!handler) {
      const hint = this.opts.unavailableHint ? ` (${this.opts.unavailableHint})` : '';
      return this.fail(id, new TetherError('FAILED_PRECONDITION', `${method} is not available on this connection${hint}`));
    }
    const parsed = schema.safeParse(params ?? {});
    if (!parsed.success)
      return this.fail(id, new TetherError('INVALID_ARGUMENT', `invalid params for ${method}: ${describeIssues(parsed.error)}`));
    let out: unknown;
    try {
      out = handler(parsed.data, id);
    } catch (err) {
      return this.failed(id, method, err);
    }
    if (out === LATER) return;
    // Answered a microtask later even when the value is at hand: what the handler queued in its own microtasks goes first.
    Promise.resolve(out).then(
      (result) => (result === LATER ? undefined : this.respond(id, method, result)),
      (err) => this.failed(id, method, err),
    );
  }

  private onNotificationMessage(method: string, params: unknown): void {
    const schema = this.opts.notifications && Object.hasOwn(this.opts.notifications, method) ? this.opts.notifications[method] : undefined;
    const handler = schema && (this.notificationHandlers?.get(method) ?? this.sharedNotification(method));
    if (!handler) {
      if (this.opts.otherNotification && !schema) this.opts.otherNotification(method, params);
      else this.log.debug({ method }, 'ignoring unknown notification');
      return;
    }
    const checked = checkedParams(method, params, schema, this.opts.fastChecks?.[method], this.log);
    if (checked === BAD) return;
    try {
      handler(checked);
    } catch (err) {
      this.log.error({ method, err: asTetherError(err).message }, 'notification handler failed');
    }
  }

  /** `method` of the shared table, bound to its connection's object (made per request, dropped after). */
  private sharedRequest(method: string): RequestHandler | undefined {
    const table = this.shared?.requests;
    const h = table && Object.hasOwn(table, method) ? (table[method] as (self: unknown, params: unknown, id: RpcId) => unknown) : undefined;
    return h && ((params, id) => h(this.sharedSelf, params, id));
  }

  private sharedNotification(method: string): NotificationHandler | undefined {
    const table = this.shared?.notifications;
    const h = table && Object.hasOwn(table, method) ? (table[method] as (self: unknown, params: unknown) => void) : undefined;
    return h && ((params) => h(this.sharedSelf, params));
  }

  private settle(id: RpcId | null, result: unknown, error: RpcErrorObject | undefined): void {
    if (id === null) {
      if (error) this.log.warn({ error: error.message }, 'peer reported an error about an unreadable message');
      return;
    }
    const entry = this.take(id);
    if (!entry) return; // answered late (timed out, cancelled) or never asked: nothing waits for it
    clearTimeout(entry.timer);
    if (error) entry.reject(TetherError.fromJsonRpc(error));
    else entry.resolve(result);
  }

  // ---- outbound ----------------------------------------------------------------------------

  /**
   * Sends a request; `reply` resolves with its raw result, or rejects with the peer's error
   * (TetherError), DEADLINE_EXCEEDED after the timeout, CANCELLED on {@link cancel}, the
   * transport's reason when it refused the request, or UNAVAILABLE when the connection ended first.
   */
  call(method: string, params: unknown, opts: { timeoutMs?: number } = {}): { id: RpcId; reply: Promise<unknown> } {
    const n = this.nextId++;
    const id = this.opts.idPrefix === undefined ? n : `${this.opts.idPrefix}${n}`;
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const reply = new Promise<unknown>((resolve, reject) => {
      const entry: Pending = { resolve, reject };
      if (timeoutMs > 0) {
        entry.timer = setTimeout(() => {
          this.take(id);
          reject(new TetherError('DEADLINE_EXCEEDED', `${method} got no answer within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      (this.pending ??= new Map()).set(id, entry);
      this.admit(); // over the budget it cuts; the transport's send then says why it refused
      const text = JSON.stringify({ jsonrpc: '2.0', id, method, params });
      this.transport.send(text).then(
        () => this.opts.onPosted?.(text),
        (err) => this.drop(id, asTetherError(err, 'UNAVAILABLE')),
      );
    });
    return { id, reply };
  }

  /** {@link call}, when the id does not matter. */
  request(method: string, params: unknown, opts: { timeoutMs?: number } = {}): Promise<unknown> {
    return this.call(method, params, opts).reply;
  }

  /** Stops waiting for request `id`: its reply rejects CANCELLED and a late answer is ignored. */
  cancel(id: RpcId): void {
    this.drop(id, new TetherError('CANCELLED', 'cancelled'));
  }

  /** Sends a notification; resolves when handed to the transport, rejects with its reason. */
  notify(method: string, params: unknown): Promise<void> {
    this.admit();
    const text = JSON.stringify({ jsonrpc: '2.0', method, params });
    return this.transport.send(text).then(() => this.opts.onPosted?.(text));
  }

  /** Sends a notification without a promise (hot paths): false, having sent nothing, when closed, cut or over the frame limit. */
  postNotification(method: string, params: unknown): boolean {
    return this.post(JSON.stringify({ jsonrpc: '2.0', method, params }));
  }

  /** Posts one message already serialized, within the outbound budget; false when it was not sent. */
  post(text: string): boolean {
    if (!this.admit() || !this.transport.post(text)) return false;
    this.opts.onPosted?.(text);
    return true;
  }

  /** Answers request `id`; an answer over the frame limit is RESOURCE_EXHAUSTED instead, so the caller is never left waiting. */
  respond(id: RpcId, method: string, result: unknown): void {
    const text = JSON.stringify({ jsonrpc: '2.0', id, result: result ?? {} });
    const tooLarge = replyTooLarge(method, text, this.transport.maxFrameBytes);
    if (tooLarge) return this.fail(id, tooLarge);
    if (!this.post(text)) this.log.debug({ method }, 'answer not sent: the connection is closed');
  }

  /** Answers request `id` with an error (core/errors.ts: the code's JSON-RPC number and `data.code`). */
  fail(id: RpcId, err: unknown): void {
    this.reply(id, asTetherError(err).toJsonRpc());
  }

  /**
   * The one slow-consumer rule: whether the transport may take another message. False once
   * closed; when it holds more than the outbound budget, closes it (RESOURCE_EXHAUSTED,
   * {@link SLOW_CONSUMER_REASON}) and returns false. `held`: what counts against the budget
   * (default the transport's unwritten bytes; a sender that queues in front of it says its own).
   */
  admit(held = this.transport.bufferedBytes): boolean {
    if (this.transport.isClosed) return false;
    if (held <= this.maxBufferedBytes) return true;
    this.log.warn({ buffered: held, limit: this.maxBufferedBytes }, 'cutting slow consumer');
    this.transport.close('RESOURCE_EXHAUSTED', SLOW_CONSUMER_REASON);
    this.opts.onSlowConsumer?.(held);
    return false;
  }

  /** The connection is gone: every request still waiting rejects UNAVAILABLE. Call once, when it closed. */
  end(reason: string): void {
    for (const id of [...(this.pending?.keys() ?? [])])
      this.drop(id, new TetherError('UNAVAILABLE', `connection closed before the answer: ${reason}`));
  }

  private failed(id: RpcId, method: string, err: unknown): void {
    const e = asTetherError(err);
    if (e.code === 'INTERNAL') this.log.error({ method, err: e.message }, 'request handler failed');
    this.fail(id, e);
  }

  private reply(id: RpcId | null, error: RpcErrorObject): void {
    if (!this.post(JSON.stringify({ jsonrpc: '2.0', id, error })))
      this.log.debug({ id }, 'error answer not sent: the connection is closed');
  }

  /** Removes and returns request `id`'s entry; the map goes with its last entry (an idle connection holds none). */
  private take(id: RpcId): Pending | undefined {
    const entry = this.pending?.get(id);
    if (!entry) return undefined;
    this.pending!.delete(id);
    if (this.pending!.size === 0) this.pending = undefined;
    return entry;
  }

  private drop(id: RpcId, err: TetherError): void {
    const entry = this.take(id);
    if (!entry) return;
    clearTimeout(entry.timer);
    entry.reject(err);
  }
}

/** What {@link checkedParams} returns for params their schema refuses. */
export const BAD: unique symbol = Symbol('bad params');

/**
 * A notification's params as its handler takes them: as they are when its fast check says the
 * schema would return them unchanged, else as the schema returns them; {@link BAD} (logged)
 * when the schema refuses them.
 */
export function checkedParams(
  method: string,
  params: unknown,
  schema: Schema,
  fast: ((p: unknown) => boolean) | undefined,
  log: RpcLog,
  what = 'notification',
): unknown {
  if (fast?.(params)) return params;
  const parsed = schema.safeParse(params ?? {});
  if (parsed.success) return parsed.data;
  log.warn({ method, issues: describeIssues(parsed.error) }, `dropping ${what} with bad params`);
  return BAD;
}

/** Short, wire-safe description of a schema failure: "path: message; …". */
export function describeIssues(error: SchemaError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}

/** What to do instead, for the answers that can be asked for in parts. */
const PAGING_HINTS = new Map([
  ['sessions.list', '; ask for pages (limit, cursor)'],
  ['session_list', '; ask for pages (limit, cursor)'],
]);

/**
 * The error that replaces an answer to `method` whose JSON text is over `maxFrameBytes` (the
 * transport would refuse it and the caller would wait in vain), or undefined when it fits.
 */
export function replyTooLarge(
  method: string,
  text: string,
  maxFrameBytes: number,
  hint = PAGING_HINTS.get(method) ?? '',
): TetherError | undefined {
  if (text.length * 3 <= maxFrameBytes) return undefined; // fits however it encodes; skips counting bytes
  const bytes = utf8Length(text);
  if (bytes <= maxFrameBytes) return undefined;
  return new TetherError(
    'RESOURCE_EXHAUSTED',
    `the answer to ${method} is ${bytes} bytes, over the frame limit of ${maxFrameBytes}${hint}`,
    {
      bytes,
      limit: maxFrameBytes,
    },
  );
}

/** UTF-8 length of `text` (what Buffer.byteLength says), without Node. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4; // a surrogate pair: one code point of four bytes
      i++;
    } else bytes += 3; // the rest of the BMP, and lone surrogates (written as U+FFFD)
  }
  return bytes;
}
