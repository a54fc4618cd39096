import type { z } from 'zod';
import type { Channel, CloseInfo } from '../channel/channel.js';
import type { BinaryFrame, SendableFrame, WireFrame } from '../wire/frame.js';
import { asTetherError, TetherError } from '../errors.js';
import { silentLogger } from '../logging.js';
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
import { BAD, checkedParams, describeIssues, RpcEngine, type RpcLog, type SharedHandlers } from './engine.js';

type Parsed<M extends MethodName> = z.infer<(typeof Methods)[M]['params']>;
type RequestHandler<M extends MethodName> = (params: Parsed<M>) => ResultOf<M> | Promise<ResultOf<M>>;
type NotificationHandler<N extends NotificationName> = (params: NotificationParams<N>) => void;
type BinaryNotificationHandler<N extends BinaryNotificationName> = (params: BinaryNotificationParams<N>, body: Uint8Array) => void;

/**
 * The native protocol's handlers for one kind of connection, defined once (see
 * {@link RpcPeer.serve}): each takes the connection's own object first.
 */
export interface PeerHandlers<T> {
  readonly requests?: { readonly [M in MethodName]?: (self: T, params: Parsed<M>) => ResultOf<M> | Promise<ResultOf<M>> };
  readonly notifications?: { readonly [N in NotificationName]?: (self: T, params: NotificationParams<N>) => void };
}

/** The native protocol's method table as the engine reads it: each method's params schema. */
const METHOD_PARAMS = Object.fromEntries(Object.entries(Methods).map(([name, spec]) => [name, spec.params])) as {
  [M in MethodName]: (typeof Methods)[M]['params'];
};

export interface RpcPeerOptions {
  /** Where it logs (a pino Logger is one); silent unless given. */
  logger?: RpcLog;
  /** Bound on every outgoing request (default DEFAULT_REQUEST_TIMEOUT_MS of core/rpc/engine.ts); 0 means none. */
  requestTimeoutMs?: number;
  /**
   * Outbound budget, in bytes the channel holds but has not yet written (requests, replies,
   * notifications and posted frames alike): the engine's slow-consumer rule
   * (RpcEngineOptions.maxBufferedBytes, see Channel.bufferedBytes). Default: none.
   */
  maxBufferedBytes?: number;
  /** Called once, with the bytes held, when the budget cuts the channel. */
  onSlowConsumer?: (bufferedBytes: number) => void;
}

/**
 * The native protocol (docs/protocol.md) over one Channel: the JSON-RPC engine
 * (core/rpc/engine.ts) typed by the method tables of core/protocol/methods.ts, plus the binary
 * notifications (a header naming them, bytes beside) that ride the same channel. Unknown
 * notifications are ignored, unknown methods and bad params get typed errors, and the
 * connection stays usable after any bad message.
 */
export class RpcPeer {
  private readonly engine: RpcEngine<typeof METHOD_PARAMS, typeof Notifications>;
  private binaryHandlers: Map<string, (params: unknown, body: Uint8Array) => void> | undefined;
  private rawTextHandler: ((text: string) => boolean) | undefined;
  private readonly log: RpcLog;

  constructor(
    readonly channel: Channel,
    opts: RpcPeerOptions = {},
  ) {
    this.log = opts.logger ?? silentLogger;
    this.engine = new RpcEngine(channel, {
      methods: METHOD_PARAMS,
      notifications: Notifications,
      fastChecks: FAST_NOTIFICATION_CHECKS,
      unavailableHint: 'send hello first, with the right role',
      requestTimeoutMs: opts.requestTimeoutMs,
      maxBufferedBytes: opts.maxBufferedBytes,
      onSlowConsumer: opts.onSlowConsumer,
      logger: this.log,
    });
    void channel.closed.then((info) => this.engine.end(info.reason));
  }

  onRequest<M extends MethodName>(method: M, handler: RequestHandler<M>): this {
    this.engine.handle(method, handler as (params: unknown) => unknown);
    return this;
  }

  /**
   * Serves `handlers` (one table shared by every connection of a kind) with `self` as each
   * handler's first argument: no closure or map entry per method per connection. A handler
   * given to {@link onRequest} or {@link onNotification} for the same name goes first.
   */
  serve<T>(handlers: PeerHandlers<T>, self: T): this {
    this.engine.serve(handlers as SharedHandlers<T>, self);
    return this;
  }

  onNotification<N extends NotificationName>(name: N, handler: NotificationHandler<N>): this {
    this.engine.onNotification(name, handler as (params: unknown) => void);
    return this;
  }

  /**
   * Handles one kind of binary notification (a header naming it, bytes beside), in arrival
   * order with the JSON-RPC messages. Like JSON notifications, unknown or malformed ones are
   * dropped (and logged); the connection stays usable.
   */
  onBinaryNotification<N extends BinaryNotificationName>(name: N, handler: BinaryNotificationHandler<N>): this {
    (this.binaryHandlers ??= new Map()).set(name, handler as (params: unknown, body: Uint8Array) => void);
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
    return this.engine.admit() && this.channel.post(frame);
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
    return this.engine.request(method, params, opts).then((raw) => {
      const parsed = Methods[method].result.safeParse(raw);
      if (!parsed.success) throw new TetherError('INTERNAL', `bad ${method} result: ${describeIssues(parsed.error)}`);
      return parsed.data as ResultOf<M>;
    });
  }

  /** Sends a notification; resolves when handed to the transport. */
  notify<N extends NotificationName>(name: N, params: NotificationParams<N>): Promise<void> {
    return this.engine.notify(name, params);
  }

  /**
   * Sends a notification without a promise (hot paths: acks): false, having sent nothing, when
   * the channel is closed, over the outbound budget (then cut) or the frame is over its limit.
   */
  postNotification<N extends NotificationName>(name: N, params: NotificationParams<N>): boolean {
    return this.engine.postNotification(name, params);
  }

  /**
   * Posts one notification already serialized, as text or UTF-8 bytes, whole or in pieces (hot
   * paths: the same frame to many peers), within the outbound budget. Returns false, having sent nothing,
   * when the channel is closed (or was just cut for being over budget) or the frame is over
   * its limit.
   */
  post(frame: SendableFrame): boolean {
    return this.engine.admit() && this.channel.post(frame);
  }

  /** The outbound budget in bytes (Infinity when none). */
  get maxBufferedBytes(): number {
    return this.engine.maxBufferedBytes;
  }

  /**
   * The slow-consumer rule for frames a sender keeps in a queue of its own in front of the
   * channel: true while `queuedBytes` is within the budget; past it the channel is cut as
   * {@link post}'s check cuts it, and false.
   */
  admitQueued(queuedBytes: number): boolean {
    return this.engine.admit(queuedBytes);
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
    this.engine.receive(frame);
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
    const handler = this.binaryHandlers?.get(method);
    const schema = Object.hasOwn(BinaryNotifications, method) ? (BinaryNotifications as Record<string, z.ZodType>)[method] : undefined;
    if (!handler || !schema) {
      this.log.debug({ method }, 'ignoring unknown binary notification');
      return;
    }
    const params = checkedParams(
      method,
      header.params,
      schema,
      (FAST_BINARY_CHECKS as Partial<Record<string, (p: unknown) => boolean>>)[method],
      this.log,
      'binary notification',
    );
    if (params === BAD) return;
    try {
      handler(params, frame.body);
    } catch (err) {
      this.log.error({ method, err: asTetherError(err).message }, 'binary notification handler failed');
    }
  }
}
