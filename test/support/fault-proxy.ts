/**
 * A fault-injecting TCP proxy for tests (threats.md part 4: netem is missing here, so latency,
 * stalls, cuts and half-open links are made in userland). It listens on 127.0.0.1 port 0 and
 * relays every connection byte for byte to one target port, and on request:
 *
 * - delays every chunk by a latency (plus jitter), keeping order;
 * - throttles each direction of each connection to a bandwidth (bytes per second);
 * - stalls one or both directions (bytes are held, bounded: the sending socket is paused once
 *   `maxBufferedBytes` wait), and resumes them;
 * - cuts a connection after exactly N more bytes in one direction (RST by default, or FIN), or
 *   cuts every connection now;
 * - turns every open connection half-open: nothing is forwarded any more in either direction
 *   and the proxy never closes it, like a blackholed link (the peers must notice by themselves);
 * - refuses new connections (accepted and dropped at once), like a link that stays down.
 *
 * Every connection, open or closed, is listed in `connections` (closed ones bounded by
 * `maxHistory`). close() destroys everything and stops listening.
 */
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { testRandom } from './seed.js';

/** `up`: from the dialing side to the target; `down`: from the target back. */
export type Direction = 'up' | 'down';

export interface ProxyConnection {
  readonly id: number;
  readonly openedAt: number;
  /** Bytes forwarded so far, per direction. */
  readonly bytes: { up: number; down: number };
  state: 'open' | 'half-open' | 'closed';
  /** Why it closed: a peer ended it, the proxy cut it, or close() ended it. */
  closedBy?: 'client' | 'target' | 'cut' | 'proxy';
}

export interface FaultProxyOptions {
  targetPort: number;
  targetHost?: string;
  /** Delay added to every chunk (default 0). */
  latencyMs?: number;
  /** Extra random delay up to this much per chunk; order is kept (default 0). */
  jitterMs?: number;
  /** Where the jitter's random numbers come from (default: the test's own, from the run's seed; test/support/seed.ts). */
  random?: () => number;
  /** Bandwidth of each direction of each connection, bytes per second (default 0: unlimited). */
  bytesPerSecond?: number;
  /** Bytes held per direction per connection before the sender is paused (default 1 MiB). */
  maxBufferedBytes?: number;
  /** Open connections at once; more are refused (default 256). */
  maxConnections?: number;
  /** Closed connections kept in `connections` (default 1000). */
  maxHistory?: number;
}

interface ArmedCut {
  direction: Direction;
  remaining: number;
  mode: 'rst' | 'fin';
  resolve: (c: ProxyConnection) => void;
  reject: (e: Error) => void;
  timer?: NodeJS.Timeout;
}

/** Throttled links forward in slices of this size. */
const THROTTLE_SLICE_BYTES = 2048;

/** One direction of one connection: a bounded, ordered queue of delayed chunks. */
class Pipe {
  private queue: { chunk: Buffer; due: number }[] = [];
  private queued = 0;
  private lastDue = 0;
  /** When the throttled link is free to carry the next byte. */
  private wireFreeAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private srcPaused = false;
  private ended = false;

  constructor(
    private readonly proxy: FaultProxy,
    private readonly link: Link,
    readonly direction: Direction,
    private readonly src: Socket,
    private readonly dst: Socket,
  ) {
    src.on('data', (chunk: Buffer) => this.onData(chunk));
    src.on('end', () => {
      this.ended = true;
      this.pump();
    });
  }

  private onData(chunk: Buffer): void {
    if (this.link.dead || this.link.info.state !== 'open') return; // half-open or cut: dropped
    const o = this.proxy.settings;
    // Throttled: the chunk goes in small slices, each due when the wire has carried the last.
    const step = o.bytesPerSecond > 0 ? THROTTLE_SLICE_BYTES : chunk.length;
    for (let off = 0; off < chunk.length; off += step) {
      const slice = chunk.subarray(off, off + step);
      let due = Math.max(this.lastDue, Date.now() + o.latencyMs + (o.jitterMs > 0 ? o.random() * o.jitterMs : 0));
      if (o.bytesPerSecond > 0) {
        due = Math.max(due, this.wireFreeAt);
        this.wireFreeAt = due + (slice.length * 1000) / o.bytesPerSecond;
      }
      this.lastDue = due;
      this.queue.push({ chunk: slice, due });
    }
    this.queued += chunk.length;
    if (this.queued >= o.maxBufferedBytes && !this.srcPaused) {
      this.srcPaused = true;
      this.src.pause();
    }
    this.pump();
  }

  /** Drops whatever is held (half-open, cut). */
  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue = [];
    this.queued = 0;
  }

  pump(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.queue.length && !this.link.dead && this.link.info.state === 'open' && !this.proxy.isStalled(this.direction)) {
      const head = this.queue[0];
      const wait = head.due - Date.now();
      if (wait > 0) {
        this.timer = setTimeout(() => this.pump(), wait);
        return;
      }
      this.queue.shift();
      this.queued -= head.chunk.length;
      const allowed = this.proxy.takeBudget(this.direction, head.chunk.length);
      const cut = this.proxy.firedCut;
      if (cut) {
        // An armed cut fires inside (or at the end of) this chunk: forward exactly up to it, then cut.
        this.proxy.firedCut = undefined;
        const part = head.chunk.subarray(0, allowed);
        this.link.info.bytes[this.direction] += part.length;
        this.link.dying = true;
        let done = false;
        const finish = () => {
          if (done) return;
          done = true;
          clearTimeout(fallback);
          this.link.cut(cut.mode);
          cut.resolve(this.link.info);
        };
        // Cut once the last bytes are handed to the kernel, or after a bound if the receiver
        // is not reading (then fewer bytes may arrive; the cut still happens).
        const fallback = setTimeout(finish, 200);
        if (part.length) this.dst.write(part, finish);
        else finish();
        return;
      }
      this.link.info.bytes[this.direction] += head.chunk.length;
      this.dst.write(head.chunk);
    }
    if (this.srcPaused && this.queued < this.proxy.settings.maxBufferedBytes / 2) {
      this.srcPaused = false;
      this.src.resume();
    }
    if (this.ended && !this.queue.length && !this.link.dead && this.link.info.state === 'open') this.dst.end();
  }
}

/** Both sockets of one relayed connection. */
class Link {
  readonly pipes: Pipe[];
  /** Set once the proxy decided to end it (bytes after that point are dropped). */
  dying = false;

  constructor(
    readonly info: ProxyConnection,
    readonly client: Socket,
    readonly target: Socket,
    private readonly onClosed: (l: Link) => void,
    proxy: FaultProxy,
  ) {
    this.pipes = [new Pipe(proxy, this, 'up', client, target), new Pipe(proxy, this, 'down', target, client)];
    const closed = { client: false, target: false };
    const onClose = (by: 'client' | 'target', hadError: boolean) => {
      closed[by] = true;
      const other = by === 'client' ? this.target : this.client;
      if (this.info.state === 'half-open') {
        // A blackhole carries no FIN or RST: the other side finds out on its own.
        if (closed.client && closed.target) this.finish(by);
        return;
      }
      if (closed.client && closed.target) return this.finish(by);
      if (hadError || this.dying) {
        this.finish(by);
        other.destroy();
        return;
      }
      // Orderly end: the pipe from this side flushes what it holds and ends the other side;
      // a peer that never closes its end is dropped after a bound.
      setTimeout(() => {
        other.destroy();
        this.finish(by);
      }, 2_000).unref();
    };
    client.on('close', (hadError) => onClose('client', hadError));
    target.on('close', (hadError) => onClose('target', hadError));
    client.on('error', () => {});
    target.on('error', () => {});
  }

  get dead(): boolean {
    return this.dying || this.info.state === 'closed';
  }

  private finish(by: ProxyConnection['closedBy']): void {
    if (this.info.state === 'closed') return;
    this.info.state = 'closed';
    this.info.closedBy ??= by;
    for (const p of this.pipes) p.clear();
    this.onClosed(this);
  }

  /** Ends both sides at once: RST (resetAndDestroy) or FIN (destroy after end). */
  cut(mode: 'rst' | 'fin'): void {
    if (this.info.state === 'closed') return;
    this.info.closedBy = 'cut';
    this.dying = true;
    for (const p of this.pipes) p.clear();
    for (const s of [this.client, this.target]) {
      try {
        if (mode === 'rst' && !s.destroyed && !s.connecting) s.resetAndDestroy();
        else s.destroy();
      } catch {
        s.destroy();
      }
    }
    this.finish('cut');
  }

  halfOpen(): void {
    if (this.info.state !== 'open') return;
    this.info.state = 'half-open';
    for (const p of this.pipes) p.clear();
  }

  destroy(): void {
    this.info.closedBy ??= 'proxy';
    this.client.destroy();
    this.target.destroy();
    this.finish('proxy');
  }
}

/** See the file comment. Create with {@link FaultProxy.start}. */
export class FaultProxy {
  /** Current settings; latency and jitter may be changed while running (setLatency). */
  readonly settings: Required<Omit<FaultProxyOptions, 'targetHost' | 'targetPort'>>;
  /** The cut that just fired, handed from takeBudget() to the pipe that forwards its last bytes. */
  firedCut: ArmedCut | undefined;
  private readonly links = new Set<Link>();
  private readonly history: ProxyConnection[] = [];
  private readonly stalled = { up: false, down: false };
  private readonly cuts: ArmedCut[] = [];
  private readonly waiters = new Set<() => void>();
  private refusing = false;
  private nextId = 1;
  private closing: Promise<void> | undefined;
  /** Connections refused while refuse(true) was on, or over maxConnections. */
  refused = 0;
  /** Connections ended by a cut (cutAfter or cutAll). */
  cutsDone = 0;

  private constructor(
    private readonly server: Server,
    private readonly opts: FaultProxyOptions,
  ) {
    this.settings = {
      latencyMs: opts.latencyMs ?? 0,
      jitterMs: opts.jitterMs ?? 0,
      random: opts.random ?? testRandom(),
      bytesPerSecond: opts.bytesPerSecond ?? 0,
      maxBufferedBytes: opts.maxBufferedBytes ?? 1024 * 1024,
      maxConnections: opts.maxConnections ?? 256,
      maxHistory: opts.maxHistory ?? 1000,
    };
  }

  /** Starts listening on 127.0.0.1:0. */
  static async start(opts: FaultProxyOptions): Promise<FaultProxy> {
    const server = createServer();
    const proxy = new FaultProxy(server, opts);
    server.on('connection', (s) => proxy.accept(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** `scheme://127.0.0.1:port`, e.g. url('ws') or url('grpc'). */
  url(scheme: 'ws' | 'grpc'): string {
    return `${scheme}://127.0.0.1:${this.port}`;
  }

  /** Every connection, oldest first: the open ones and the last `maxHistory` closed ones. */
  get connections(): ProxyConnection[] {
    return [...this.history, ...[...this.links].map((l) => l.info)].sort((a, b) => a.id - b.id);
  }

  /** Connections currently open (forwarding). */
  get open(): ProxyConnection[] {
    return [...this.links].map((l) => l.info).filter((c) => c.state === 'open');
  }

  /** Total connections accepted (and relayed) so far. */
  get accepted(): number {
    return this.nextId - 1;
  }

  setLatency(latencyMs: number, jitterMs = 0): void {
    this.settings.latencyMs = latencyMs;
    this.settings.jitterMs = jitterMs;
  }

  isStalled(d: Direction): boolean {
    return this.stalled[d];
  }

  /** Holds bytes in one or both directions (bounded: senders are paused) until resume(). */
  stall(direction: Direction | 'both' = 'both'): void {
    for (const d of dirs(direction)) this.stalled[d] = true;
  }

  /** Forwards what stall() held, in order, and everything after it. */
  resume(direction: Direction | 'both' = 'both'): void {
    for (const d of dirs(direction)) this.stalled[d] = false;
    for (const l of this.links) for (const p of l.pipes) p.pump();
  }

  /**
   * Arms a cut: once `bytes` more bytes were forwarded in `direction` (counted over every
   * connection from now on), the connection carrying the last of them gets exactly up to that
   * byte and is then cut on both sides. Resolves with that connection; rejects after
   * `timeoutMs` (default 10 s) if not enough bytes flowed. Cuts fire in the order armed.
   */
  cutAfter(direction: Direction, bytes: number, opts: { mode?: 'rst' | 'fin'; timeoutMs?: number } = {}): Promise<ProxyConnection> {
    return new Promise((resolve, reject) => {
      const cut: ArmedCut = { direction, remaining: Math.max(0, Math.floor(bytes)), mode: opts.mode ?? 'rst', resolve, reject };
      cut.timer = setTimeout(() => {
        const i = this.cuts.indexOf(cut);
        if (i >= 0) this.cuts.splice(i, 1);
        reject(
          new Error(`cutAfter(${direction}, ${bytes}): only ${bytes - cut.remaining} bytes flowed within ${opts.timeoutMs ?? 10_000} ms`),
        );
      }, opts.timeoutMs ?? 10_000);
      this.cuts.push(cut);
      if (cut.remaining === 0) {
        // Nothing to wait for: cut whatever is open now.
        this.cuts.splice(this.cuts.indexOf(cut), 1);
        clearTimeout(cut.timer);
        const [first] = [...this.links].filter((l) => !l.dead);
        if (!first) return reject(new Error('cutAfter(…, 0): no open connection'));
        this.cutsDone++;
        first.cut(cut.mode);
        resolve(first.info);
      }
    });
  }

  /** Cancels every armed cut that has not fired (their promises reject). */
  disarm(): void {
    for (const c of this.cuts.splice(0)) {
      clearTimeout(c.timer);
      c.reject(new Error('disarmed'));
    }
  }

  /**
   * Called by a pipe before forwarding `n` bytes: how many may go. When an armed cut fires within
   * them (its last byte included), it is handed over in `firedCut` for the pipe to carry out.
   */
  takeBudget(d: Direction, n: number): number {
    const cut = this.cuts.find((c) => c.direction === d);
    if (!cut) return n;
    if (n < cut.remaining) {
      cut.remaining -= n;
      return n;
    }
    const allowed = cut.remaining;
    this.cuts.splice(this.cuts.indexOf(cut), 1);
    clearTimeout(cut.timer);
    this.firedCut = cut;
    this.cutsDone++;
    return allowed;
  }

  /** Cuts every open connection now (RST by default); returns how many. */
  cutAll(mode: 'rst' | 'fin' = 'rst'): number {
    let n = 0;
    for (const l of [...this.links]) {
      if (l.dead) continue;
      l.cut(mode);
      n++;
    }
    this.cutsDone += n;
    return n;
  }

  /**
   * Every open connection (or those `which` picks) stops forwarding in both directions and is
   * never closed by us. Returns how many.
   */
  halfOpen(which: (c: ProxyConnection) => boolean = () => true): number {
    let n = 0;
    for (const l of this.links) {
      if (l.info.state !== 'open' || !which(l.info)) continue;
      l.halfOpen();
      n++;
    }
    return n;
  }

  /** While on, new connections are accepted and dropped at once. */
  refuse(on: boolean): void {
    this.refusing = on;
  }

  /** Resolves when `pred()` holds (checked on every connection change), rejects after timeoutMs. */
  waitFor(pred: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!pred()) return;
        clearTimeout(t);
        this.waiters.delete(check);
        resolve();
      };
      const t = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`fault proxy: timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.waiters.add(check);
    });
  }

  /** Destroys every connection, rejects armed cuts and stops listening. Idempotent. */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      this.disarm();
      this.stalled.up = this.stalled.down = false;
      for (const l of [...this.links]) l.destroy();
      for (const w of [...this.waiters]) w();
      await new Promise<void>((resolve) => this.server.close(() => resolve()));
    })());
  }

  private changed(): void {
    for (const w of [...this.waiters]) w();
  }

  private accept(client: Socket): void {
    client.on('error', () => {});
    if (this.closing || this.refusing || this.links.size >= this.settings.maxConnections) {
      this.refused++;
      client.destroy();
      return;
    }
    client.setNoDelay(true);
    const target = connect(this.opts.targetPort, this.opts.targetHost ?? '127.0.0.1');
    target.setNoDelay(true);
    const info: ProxyConnection = { id: this.nextId++, openedAt: Date.now(), bytes: { up: 0, down: 0 }, state: 'open' };
    const link = new Link(
      info,
      client,
      target,
      (l) => {
        this.links.delete(l);
        this.history.push(l.info);
        if (this.history.length > this.settings.maxHistory) this.history.shift();
        this.changed();
      },
      this,
    );
    this.links.add(link);
    this.changed();
  }
}

function dirs(d: Direction | 'both'): Direction[] {
  return d === 'both' ? ['up', 'down'] : [d];
}
