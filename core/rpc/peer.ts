import type { z } from 'zod';
import type { Channel, CloseInfo } from '../channel/channel.js';
import type { BinaryFrame, SendableFrame, WireFrame } from '../wire/frame.js';
import { asTetherError, JSONRPC_INVALID_REQUEST, JSONRPC_PARSE_ERROR, TetherError } from '../errors.js';
import { silentLogger, type Logger } from '../logging.js';
import { classify, type RpcId } from '../protocol/jsonrpc.js';
import { FAST_BINARY_CHECKS, FAST_NOTIFICATION_CHECKS } from '../wire/fast-checks.js';
import {
  BinaryHeaders,
  BinaryNotifications,
  Methods,
  Notifications,
  type BinaryNotificationName,
  type BinaryNotificationParams,
  type MethodName,
  type NotificationName,
  type NotificationParams,
  type ParamsOf,
  type ResultOf,
} from '../protocol/methods.js';

type Parsed<M extends MethodName> = z.infer<(typeof Methods)[M]['params']>;
type RequestHandler<M extends MethodName> = (params: Parsed<M>) => ResultOf<M> | Promise<ResultOf<M>>;
type NotificationHandler<N extends NotificationName> = (params: NotificationParams<N>) => void;
type BinaryNotificationHandler<N extends BinaryNotificationName> = (params: BinaryNotificationParams<N>, body: Uint8Array) => void;

type FastChecks = Record<string, ((params: unknown) => boolean) | undefined>;
/** What {@link RpcPeer.checked} returns for params their schema refuses. */
const BAD = Symbol('bad params');

/** How long an outgoing request waits for its reply unless told otherwise. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export interface RpcPeerOptions {
  logger?: Logger;
  /** Bound on every outgoing request (default {@link DEFAULT_REQUEST_TIMEOUT_MS}); 0 means none. */
  requestTimeoutMs?: number;
  /**
   * Outbound budget, in bytes the channel holds but has not yet written (requests, replies,
   * notifications and posted frames alike). Once the channel holds more than this, the next
   * send closes it with RESOURCE_EXHAUSTED ("slow consumer") instead of queueing more: a peer
   * that stops reading cannot grow our memory past the budget plus what one turn of the event
   * loop sends it (see Channel.bufferedBytes). Default: none.
   */
  maxBufferedBytes?: number;
  /** Called once, with the bytes held, when the budget cuts the channel. */
  onSlowConsumer?: (bufferedBytes: number) => void;
}

/** The reason a peer over its outbound budget is cut with (RESOURCE_EXHAUSTED, WebSocket close 4008). */
export const SLOW_CONSUMER_REASON = 'slow consumer: send queue over limit; resume from your last seq';

/** JSON-RPC's "Invalid Request" (-32600) for a message that is not one request, notification or response. */
function invalidRequest(why: string): { code: number; message: string; data: { code: 'INVALID_ARGUMENT' } } {
  return { code: JSONRPC_INVALID_REQUEST, message: `invalid request: ${why}`, data: { code: 'INVALID_ARGUMENT' } };
}

/** What to do instead, for the answers that can be asked for in parts. */
const PAGING_HINTS = new Map([
  ['sessions.list', '; ask for pages (limit, cursor)'],
  ['session_list', '; ask for pages (limit, cursor)'],
]);

/**
 * The error that replaces an answer to `method` whose JSON text is over `maxFrameBytes` (it
 * would be dropped by the channel and the caller would wait in vain), or undefined when it fits.
 */
export function replyTooLarge(method: string, text: string, maxFrameBytes: number, hint = PAGING_HINTS.get(method) ?? ''): TetherError | undefined {
  if (text.length * 3 <= maxFrameBytes) return undefined; // fits however it encodes; skips counting bytes
  const bytes = Buffer.byteLength(text);
  if (bytes <= maxFrameBytes) return undefined;
  return new TetherError('RESOURCE_EXHAUSTED', `the answer to ${method} is ${bytes} bytes, over the frame limit of ${maxFrameBytes}${hint}`, {
    bytes,
    limit: maxFrameBytes,
  });
}

/** Short, wire-safe description of a schema failure: "path: message; …". */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}

/**
 * JSON-RPC 2.0 over one Channel. Inbound handlers are invoked in arrival order (the
 * synchronous part of each runs before the next message is looked at); a handler's promise
 * does not hold up later messages. Unknown notifications are ignored, unknown methods and bad
 * params get typed errors, and the connection stays usable after any bad message.
 */
export class RpcPeer {
  private nextId = 1;
  private readonly pending = new Map<RpcId, { resolve: (v: unknown) => void; reject: (e: TetherError) => void; timer?: NodeJS.Timeout }>();
  private readonly requestHandlers = new Map<string, (params: unknown) => unknown>();
  private readonly notificationHandlers = new Map<string, (params: unknown) => void>();
  private readonly binaryHandlers = new Map<string, (params: unknown, body: Uint8Array) => void>();
  private rawTextHandler: ((text: string) => boolean) | undefined;
  private readonly log: Logger;
  private readonly timeoutMs: number;
  private readonly maxBufferedBytes: number;
  private readonly onSlowConsumer: ((bufferedBytes: number) => void) | undefined;

  constructor(readonly channel: Channel, opts: RpcPeerOptions = {}) {
    this.log = opts.logger ?? silentLogger;
    this.timeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.maxBufferedBytes = opts.maxBufferedBytes ?? Infinity;
    this.onSlowConsumer = opts.onSlowConsumer;
    void channel.closed.then((info) => this.failPending(info));
  }

  onRequest<M extends MethodName>(method: M, handler: RequestHandler<M>): this {
    this.requestHandlers.set(method, handler as (params: unknown) => unknown);
    return this;
  }

  onNotification<N extends NotificationName>(name: N, handler: NotificationHandler<N>): this {
    this.notificationHandlers.set(name, handler as (params: unknown) => void);
    return this;
  }

  /**
   * Handles one kind of binary notification (a header naming it, bytes beside), in arrival
   * order with the JSON-RPC messages. Like JSON notifications, unknown or malformed ones are
   * dropped (and logged); the connection stays usable.
   */
  onBinaryNotification<N extends BinaryNotificationName>(name: N, handler: BinaryNotificationHandler<N>): this {
    this.binaryHandlers.set(name, handler as (params: unknown, body: Uint8Array) => void);
    return this;
  }

  /**
   * Sends a binary notification: `params` in the header, `body` as bytes, untouched. Returns
   * false (sending nothing) when the channel is closed, over the outbound budget (then cut)
   * or the frame is over the limit; a transport error later closes the channel as usual
   * (fire-and-forget, for the hot path).
   */
  postBinary<N extends BinaryNotificationName>(name: N, params: BinaryNotificationParams<N>, body: Uint8Array): boolean {
    const frame = { header: BinaryHeaders[name](params), body };
    return this.admit() && this.channel.post(frame);
  }

  /**
   * Sees each text frame before it is parsed; returning true consumes it (the library reads
   * engine-line frames without parsing their line this way). Frames it declines are handled
   * as ordinary JSON-RPC.
   */
  onRawText(handler: (text: string) => boolean): this {
    this.rawTextHandler = handler;
    return this;
  }

  /** Sends a request and resolves with its validated result. */
  request<M extends MethodName>(method: M, params: ParamsOf<M>, opts: { timeoutMs?: number } = {}): Promise<ResultOf<M>> {
    const id = this.nextId++;
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    return new Promise<unknown>((resolve, reject) => {
      const entry: { resolve: (v: unknown) => void; reject: (e: TetherError) => void; timer?: NodeJS.Timeout } = { resolve, reject };
      if (timeoutMs > 0) {
        entry.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new TetherError('DEADLINE_EXCEEDED', `${method} got no answer within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      this.pending.set(id, entry);
      this.admit();
      this.channel.send(JSON.stringify({ jsonrpc: '2.0', id, method, params })).catch((err) => {
        clearTimeout(entry.timer);
        this.pending.delete(id);
        reject(asTetherError(err, 'UNAVAILABLE'));
      });
    }).then((raw) => {
      const parsed = Methods[method].result.safeParse(raw);
      if (!parsed.success) throw new TetherError('INTERNAL', `bad ${method} result: ${describeIssues(parsed.error)}`);
      return parsed.data as ResultOf<M>;
    });
  }

  /** Sends a notification; resolves when handed to the transport. */
  notify<N extends NotificationName>(name: N, params: NotificationParams<N>): Promise<void> {
    const text = JSON.stringify({ jsonrpc: '2.0', method: name, params });
    this.admit();
    return this.channel.send(text);
  }

  /**
   * Sends a notification without a promise (hot paths: acks): false, having sent nothing, when
   * the channel is closed, over the outbound budget (then cut) or the frame is over its limit.
   */
  postNotification<N extends NotificationName>(name: N, params: NotificationParams<N>): boolean {
    return this.post(JSON.stringify({ jsonrpc: '2.0', method: name, params }));
  }

  /**
   * Posts one notification already serialized, as text or UTF-8 bytes, whole or in pieces (hot
   * paths: the same frame to many peers), within the outbound budget. Returns false, having sent nothing,
   * when the channel is closed (or was just cut for being over budget) or the frame is over
   * its limit.
   */
  post(frame: SendableFrame): boolean {
    return this.admit() && this.channel.post(frame);
  }

  /**
   * Whether the channel may take another message: false once closed, and closes it (slow
   * consumer) when it holds more than the outbound budget.
   */
  private admit(): boolean {
    if (this.channel.isClosed) return false;
    const held = this.channel.bufferedBytes;
    if (held <= this.maxBufferedBytes) return true;
    this.log.warn({ buffered: held, limit: this.maxBufferedBytes }, 'cutting slow consumer');
    this.channel.close('RESOURCE_EXHAUSTED', SLOW_CONSUMER_REASON);
    this.onSlowConsumer?.(held);
    return false;
  }

  /** Reads the channel until it closes; resolves with how it closed. */
  async run(): Promise<CloseInfo> {
    // Drains each burst in one go: one wake-up per burst instead of an async iteration per frame.
    for (;;) {
      for (let frame = this.channel.read(); frame !== undefined; frame = this.channel.read()) this.dispatch(frame);
      if (this.channel.isClosed) return this.channel.closed;
      await this.channel.readable();
    }
  }

  private dispatch(frame: WireFrame): void {
    if (typeof frame !== 'string') return this.handleBinary(frame);
    if (this.rawTextHandler?.(frame)) return;
    let value: unknown;
    try {
      value = JSON.parse(frame);
    } catch {
      this.reply(null, { code: JSONRPC_PARSE_ERROR, message: 'parse error: frame is not valid JSON', data: { code: 'INVALID_ARGUMENT' } });
      return;
    }
    if (Array.isArray(value)) {
      this.reply(null, invalidRequest('batches are not supported (one message per frame)'));
      return;
    }
    const msg = classify(value);
    if (!msg) {
      this.reply(null, invalidRequest('not a JSON-RPC 2.0 message ("jsonrpc": "2.0", a string method, an id that is a string of at most 128 characters or a safe integer)'));
      return;
    }
    if (msg.kind === 'response') return this.settleResponse(msg.id, msg.result, msg.error);
    if (msg.kind === 'notification') return this.handleNotification(msg.method, msg.params);
    this.handleRequest(msg.id, msg.method, msg.params);
  }

  private handleBinary(frame: BinaryFrame): void {
    let header: { method?: unknown; params?: unknown };
    try {
      header = JSON.parse(frame.header) as typeof header;
    } catch {
      this.log.warn({ bytes: frame.header.length }, 'dropping binary frame whose header is not JSON');
      return;
    }
    const method = typeof header?.method === 'string' ? header.method : '';
    const handler = this.binaryHandlers.get(method);
    const schema = Object.hasOwn(BinaryNotifications, method) ? (BinaryNotifications as Record<string, z.ZodType>)[method] : undefined;
    if (!handler || !schema) {
      this.log.debug({ method }, 'ignoring unknown binary notification');
      return;
    }
    const params = this.checked('binary notification', method, header.params, schema, (FAST_BINARY_CHECKS as FastChecks)[method]);
    if (params === BAD) return;
    try {
      handler(params, frame.body);
    } catch (err) {
      this.log.error({ method, err: asTetherError(err).message }, 'binary notification handler failed');
    }
  }

  private handleNotification(method: string, params: unknown): void {
    const handler = this.notificationHandlers.get(method);
    const schema = Object.hasOwn(Notifications, method) ? (Notifications as Record<string, z.ZodType>)[method] : undefined;
    if (!handler || !schema) {
      this.log.debug({ method }, 'ignoring unknown notification');
      return;
    }
    const checked = this.checked('notification', method, params, schema, (FAST_NOTIFICATION_CHECKS as FastChecks)[method]);
    if (checked === BAD) return;
    try {
      handler(checked);
    } catch (err) {
      this.log.error({ method, err: asTetherError(err).message }, 'notification handler failed');
    }
  }

  /**
   * A notification's params as its handler takes them: as they are when its fast check
   * (core/wire/fast-checks.ts) says the schema would return them unchanged, else as the
   * schema returns them; BAD (logged) when the schema refuses them.
   */
  private checked(what: string, method: string, params: unknown, schema: z.ZodType, fast: ((p: unknown) => boolean) | undefined): unknown {
    if (fast?.(params)) return params;
    const parsed = schema.safeParse(params ?? {});
    if (parsed.success) return parsed.data;
    this.log.warn({ method, issues: describeIssues(parsed.error) }, `dropping ${what} with bad params`);
    return BAD;
  }

  private handleRequest(id: RpcId, method: string, params: unknown): void {
    const handler = this.requestHandlers.get(method);
    // Own properties only: `__proto__`, `toString` and the like are unknown methods, not "send hello first".
    const spec = Object.hasOwn(Methods, method) ? (Methods as Record<string, { params: z.ZodType }>)[method] : undefined;
    if (!spec) {
      this.reply(id, new TetherError('UNIMPLEMENTED', `unknown method: ${method}`).toJsonRpc());
      return;
    }
    if (!handler) {
      this.reply(id, new TetherError('FAILED_PRECONDITION', `${method} is not available on this connection (send hello first, with the right role)`).toJsonRpc());
      return;
    }
    const parsed = spec.params.safeParse(params ?? {});
    if (!parsed.success) {
      this.reply(id, new TetherError('INVALID_ARGUMENT', `invalid params for ${method}: ${describeIssues(parsed.error)}`).toJsonRpc());
      return;
    }
    let out: unknown;
    try {
      out = handler(parsed.data);
    } catch (err) {
      this.replyError(id, method, err);
      return;
    }
    Promise.resolve(out).then(
      (result) => this.sendResult(id, method, result ?? {}),
      (err) => this.replyError(id, method, err),
    );
  }

  /** Sends a result; one over the frame limit is answered RESOURCE_EXHAUSTED instead (the caller is never left waiting). */
  private sendResult(id: RpcId, method: string, result: unknown): void {
    if (!this.admit()) return;
    const text = JSON.stringify({ jsonrpc: '2.0', id, result });
    const tooLarge = replyTooLarge(method, text, this.channel.maxFrameBytes);
    if (tooLarge) return this.reply(id, tooLarge.toJsonRpc());
    this.channel.send(text).catch((err) => this.log.debug({ err: asTetherError(err).message }, 'send failed'));
  }

  private replyError(id: RpcId, method: string, err: unknown): void {
    const e = asTetherError(err);
    if (e.code === 'INTERNAL') this.log.error({ method, err: e.message }, 'request handler failed');
    this.reply(id, e.toJsonRpc());
  }

  private reply(id: RpcId | null, error: { code: number; message: string; data?: unknown }): void {
    this.send({ jsonrpc: '2.0', id, error });
  }

  private send(msg: unknown): void {
    if (!this.admit()) return;
    this.channel.send(JSON.stringify(msg)).catch((err) => this.log.debug({ err: asTetherError(err).message }, 'send failed'));
  }

  private settleResponse(id: RpcId | null, result: unknown, error?: { code: number; message: string; data?: unknown }): void {
    if (id === null) {
      if (error) this.log.warn({ error: error.message }, 'peer reported an error about an unreadable message');
      return;
    }
    const entry = this.pending.get(id);
    if (!entry) return;
    this.pending.delete(id);
    clearTimeout(entry.timer);
    if (error) entry.reject(TetherError.fromJsonRpc(error));
    else entry.resolve(result);
  }

  private failPending(info: CloseInfo): void {
    for (const [id, entry] of this.pending) {
      clearTimeout(entry.timer);
      entry.reject(new TetherError('UNAVAILABLE', `connection closed before the answer: ${info.reason}`));
      this.pending.delete(id);
    }
  }
}
