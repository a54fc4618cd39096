import { headers as natsHeaders } from '@nats-io/transport-node';
import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages } from '@nats-io/jetstream';
import type { Logger } from '../../core/logging.js';
import { turnId, UsageEntry } from '../../core/protocol/usage.js';
import type { UsageLedger } from '../usage/usage-ledger.js';
import { DropLog, MAC_HEADER, type FabricMac, type FabricMessage } from './fabric-mac.js';
import type { NatsLink } from './nats-link.js';
import { DUPLICATE_WINDOW_MS } from './session-log.js';

/** The fleet's usage ledger: one message per booked turn, subject `tether.usage.<gateway id>`. */
export const USAGE_STREAM = 'TETHER_USAGE';
const SUBJECT_PREFIX = 'tether.usage.';
const DAY_MS = 86_400_000;
/** Joining waits at most this long to have read the stream back (then starts, logged, and reads on). */
const CATCH_UP_STALL_MS = 10_000;
const RETRY_PAUSE_MS = 250;
/** Turns kept waiting for NATS at most (~300 B each); beyond, a turn stays in this gateway's ledger only, said in the log. */
export const MAX_WAITING_TURNS = 10_000;

/**
 * The cluster's usage ledger (issue 35): each turn a gateway books is published, sealed with
 * the fabric's MAC, to one JetStream stream whose max age is the usage retention (so the
 * retention is the stream's); every gateway follows the stream from its start (an ordered
 * consumer) into its own ledger, so `usage.read` and budgets see the whole fleet's turns.
 * The ledger keeps each turn once (turnId), its own included; a message no gateway sealed or
 * that is not an entry is dropped, logged.
 */
export class UsageStream {
  private messages: ConsumerMessages | undefined;
  private readonly queue: UsageEntry[] = [];
  private pumping = false;
  private closed = false;
  private unlisten: (() => void) | undefined;
  private readonly dropped: DropLog;
  /** Turns not queued since the queue was last below its bound (logged once per streak). */
  private overflow = 0;

  private constructor(
    private readonly link: NatsLink,
    private readonly mac: FabricMac,
    private readonly subject: string,
    private readonly log: Logger,
    private readonly maxWaiting: number,
  ) {
    this.dropped = new DropLog(log, 'dropping a usage message no gateway wrote, or not a turn');
  }

  /**
   * Creates the stream (or sets its max age to `retentionDays`), then feeds `ledger` every
   * turn in it and, from then on, each new one; returns once caught up. Turns `ledger` books
   * are published under `gatewayId`'s subject.
   */
  static async share(
    link: NatsLink,
    mac: FabricMac,
    ledger: UsageLedger,
    opts: { gatewayId: string; retentionDays: number; log: Logger; maxWaiting?: number },
  ): Promise<UsageStream> {
    if (!/^[A-Za-z0-9-]+$/.test(opts.gatewayId)) throw new Error(`bad gateway id for the usage stream: ${opts.gatewayId}`);
    const jsm = await jetstreamManager(link.nc);
    const config = {
      name: USAGE_STREAM,
      subjects: [`${SUBJECT_PREFIX}*`],
      max_age: opts.retentionDays * DAY_MS * 1e6,
      duplicate_window: DUPLICATE_WINDOW_MS * 1e6,
    };
    const info = await jsm.streams.info(USAGE_STREAM).catch(() => undefined);
    if (!info) await jsm.streams.add(config);
    else if (info.config.max_age !== config.max_age) await jsm.streams.update(USAGE_STREAM, { ...info.config, max_age: config.max_age });
    const s = new UsageStream(link, mac, SUBJECT_PREFIX + opts.gatewayId, opts.log, opts.maxWaiting ?? MAX_WAITING_TURNS);
    await s.follow(ledger);
    ledger.onBooked = (e) => s.publish(e);
    return s;
  }

  /**
   * Reads the stream from its start into `ledger` (resolved once caught up, or after
   * CATCH_UP_STALL_MS), then keeps following it; the consumer is made again from where it was
   * when it is lost (NATS restarted, the link came back).
   */
  private async follow(ledger: UsageLedger): Promise<void> {
    let caughtUp: () => void = () => {};
    const ready = new Promise<void>((resolve) => (caughtUp = resolve));
    this.unlisten = this.link.onChange((st) => {
      if (st.kind === 'up') void this.messages?.close();
    });
    void (async () => {
      let lastSeq = 0;
      while (!this.closed && this.link.state.kind !== 'closed') {
        try {
          const from = lastSeq
            ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: lastSeq + 1 }
            : { deliver_policy: DeliverPolicy.All };
          const consumer = await jetstream(this.link.nc).consumers.get(USAGE_STREAM, from);
          if (this.closed) return;
          if (!lastSeq && !(await consumer.info(true).catch(() => undefined))?.num_pending) caughtUp();
          this.messages = await consumer.consume();
          for await (const m of this.messages) {
            if (m.seq <= lastSeq) continue; // delivered again after the consumer was made again
            lastSeq = m.seq;
            const entry = this.open(m);
            if (entry) ledger.take(entry);
            if (m.info.pending === 0) caughtUp();
          }
        } catch (err) {
          if (!this.closed) this.log.debug({ err: String(err) }, 'usage stream consumer lost; making it again');
        }
        if (!this.closed) await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
      }
    })();
    let stall: NodeJS.Timeout | undefined;
    const inTime = await Promise.race([
      ready.then(() => true),
      new Promise<false>((r) => (stall = setTimeout(() => r(false), CATCH_UP_STALL_MS))),
    ]);
    clearTimeout(stall);
    if (!inTime)
      this.log.warn({ waitedMs: CATCH_UP_STALL_MS }, 'the usage stream was not read back in time; budgets count the rest as it arrives');
  }

  /** The entry a message carries, when a gateway sealed it and it is one; else dropped, logged. */
  private open(m: FabricMessage): UsageEntry | undefined {
    if (!this.mac.checkRecord(m, false)) {
      this.dropped.note({ subject: m.subject, bytes: m.data.length, why: 'unsealed' });
      return undefined;
    }
    try {
      return UsageEntry.parse(JSON.parse(Buffer.from(m.data).toString('utf8')));
    } catch (err) {
      this.dropped.note({ subject: m.subject, why: String(err).slice(0, 200) });
      return undefined;
    }
  }

  /**
   * Queued and published in order; retried while NATS is away (the turn id is the message id:
   * JetStream keeps one copy). The queue is bounded: a turn past it is left out of the stream
   * (this gateway's ledger still has it) and the log says how many, once per streak.
   */
  private publish(entry: UsageEntry): void {
    if (this.queue.length >= this.maxWaiting) {
      if (this.overflow++ === 0)
        this.log.warn(
          { waiting: this.queue.length },
          'the usage stream is unreachable and its queue is full: turns booked now stay on this gateway',
        );
      return;
    }
    if (this.overflow) {
      this.log.warn({ left_out: this.overflow }, 'turns were left out of the usage stream while its queue was full');
      this.overflow = 0;
    }
    this.queue.push(entry);
    void this.pump();
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    const js = jetstream(this.link.nc);
    let failed = false;
    try {
      while (this.queue.length && !this.closed) {
        const entry = this.queue[0];
        const body = Buffer.from(JSON.stringify(entry));
        const h = natsHeaders();
        h.set(MAC_HEADER, this.mac.sealRecord(this.subject, body, false));
        try {
          await js.publish(this.subject, body, { msgID: turnId(entry), headers: h });
          this.queue.shift();
          failed = false;
        } catch (err) {
          // One warning per streak of failures (NATS away), not one per retry.
          if (!failed)
            this.log.warn({ err: String(err), waiting: this.queue.length }, 'publishing a turn to the usage stream failed; retrying');
          failed = true;
          await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  /** Resolves once every turn booked so far is in the stream (bounded by `ms`). */
  async flushed(ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    while ((this.queue.length || this.pumping) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return !this.queue.length;
  }

  close(): void {
    this.closed = true;
    this.unlisten?.();
    void this.messages?.close();
  }
}
