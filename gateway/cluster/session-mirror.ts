import { DeliverPolicy, jetstream, type ConsumerMessages } from '@nats-io/jetstream';
import { gapEvent } from '../../core/protocol/events.js';
import { encodeEventFrame, frameBuffer } from '../../core/wire/session-frame.js';
import type { Logger } from '../../core/logging.js';
import { ReplayLog, type ReplayLogLimits } from '../session/session.js';
import type { Member } from '../session/session.js';
import { LogReader, SESSIONS_STREAM, sessionSubject } from './session-log.js';
import type { FabricMac } from './fabric-mac.js';
import type { NatsLink } from './nats-link.js';

/** Pause before the mirror's consumer is made again after it ended. */
const RESTART_PAUSE_MS = 100;
/** How long an attach waits for the mirror to read the history already in the stream. */
const CATCH_UP_MS = 10_000;

/**
 * A session held by another gateway, as this gateway's clients see it: one ordered consumer
 * on the session's log in JetStream (from its first message), the frames kept in a bounded
 * replay log like the home's, and handed to this gateway's attached clients in seq order,
 * each frame once per client. Frames reach the log only once JetStream holds them, so a
 * client here never sees a frame that a fail-over could lose. One mirror per session and
 * gateway, however many clients here watch it.
 */
export class SessionMirror {
  private readonly history: ReplayLog;
  private readonly members = new Map<string, { member: Member; next: number }>();
  private messages: ConsumerMessages | undefined;
  private closed = false;
  private unlisten: (() => void) | undefined;
  private caughtUp!: () => void;
  /** Resolves once the history the stream held when the mirror started has been read. */
  readonly ready = new Promise<void>((resolve) => (this.caughtUp = resolve));

  constructor(
    private readonly link: NatsLink,
    readonly sessionId: string,
    limits: ReplayLogLimits,
    private readonly log: Logger,
    private readonly mac: FabricMac,
  ) {
    this.history = new ReplayLog(limits);
    void this.run().catch((err: unknown) => {
      if (!this.closed) this.log.warn({ sessionId, err: String(err) }, 'session mirror stopped');
    });
  }

  get size(): number {
    return this.members.size;
  }

  /**
   * Reads the log until closed. When the link to NATS comes back the consumer is made again
   * from the message after the last one read (a restarted server forgets ephemeral consumers;
   * waiting for the client library to notice takes tens of seconds).
   */
  private async run(): Promise<void> {
    const subject = sessionSubject(this.sessionId);
    const reader = new LogReader({ mac: this.mac, log: this.log }, (r) => {
      if ('frame' in r) this.onFrame(r.frame.seq, frameBuffer(r.frame.bytes));
    });
    let lastStreamSeq = 0;
    this.unlisten = this.link.onChange((s) => {
      if (s.kind === 'up') void this.messages?.close();
    });
    while (!this.closed && this.link.state.kind !== 'closed') {
      try {
        const from = lastStreamSeq
          ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: lastStreamSeq + 1 }
          : { deliver_policy: DeliverPolicy.All };
        const consumer = await jetstream(this.link.nc).consumers.get(SESSIONS_STREAM, { filter_subjects: subject, ...from });
        if (this.closed) return;
        if (!lastStreamSeq && !(await consumer.info(true).catch(() => undefined))?.num_pending) this.caughtUp();
        this.messages = await consumer.consume();
        for await (const m of this.messages) {
          if (m.seq <= lastStreamSeq) continue; // delivered again after a restart of the consumer
          lastStreamSeq = m.seq;
          reader.push(m);
          if (m.info.pending === 0) this.caughtUp();
        }
      } catch (err) {
        if (!this.closed) this.log.debug({ sessionId: this.sessionId, err: String(err) }, 'session mirror consumer lost; making it again');
      }
      if (!this.closed) await new Promise((r) => setTimeout(r, RESTART_PAUSE_MS));
    }
  }

  private onFrame(seq: number, bytes: Buffer): void {
    if (seq <= this.history.lastSeq) return; // a message re-sent after a cut: kept once
    if (seq !== this.history.lastSeq + 1) this.skipTo(seq);
    this.history.append({ seq, bytes });
    for (const m of this.members.values()) {
      if (seq < m.next) continue;
      m.member.sendFrame(bytes);
      m.next = seq + 1;
    }
  }

  /**
   * The log goes on at `seq`: at the start, older frames aged out of the stream; later, frames
   * missing from the log (a double fault). The mirror's history restarts there and the clients
   * already here are told which frames they will not get, as on a resume past the history.
   */
  private skipTo(seq: number): void {
    const from = this.history.lastSeq + 1;
    this.history.restartAt(seq);
    if (from === 1) return;
    this.log.warn(
      { sessionId: this.sessionId, from_seq: from, to_seq: seq - 1 },
      'session log skips frames; clients here get a gap notice',
    );
    const gap = encodeEventFrame(this.sessionId, 0, gapEvent(from, seq - 1));
    for (const m of this.members.values()) if (m.next < seq) m.member.sendFrame(gap);
  }

  /**
   * Hands `member` the history from `fromSeq` (a gap notice first when older frames are gone)
   * and then every new frame. Waits (bounded) for the mirror to catch up with the stream first.
   */
  async attach(member: Member, fromSeq = 1): Promise<void> {
    await Promise.race([this.ready, new Promise((r) => setTimeout(r, CATCH_UP_MS).unref())]);
    const first = this.history.firstSeq;
    if (fromSeq < first && this.history.lastSeq > 0) {
      member.sendFrame(encodeEventFrame(this.sessionId, 0, gapEvent(fromSeq, first - 1)));
    }
    const from = Math.max(fromSeq, first);
    const past = from <= this.history.lastSeq ? this.history.since(from) : [];
    const frames = past.map((e) => e.bytes);
    if (member.sendReplay)
      member.sendReplay(frames); // a large one fed as the client's link drains
    else for (const bytes of frames) member.sendFrame(bytes);
    this.members.set(member.clientId, { member, next: Math.max(from, this.history.lastSeq + 1) });
  }

  /** Stops feeding one client; returns how many are left. */
  detach(clientId: string): number {
    this.members.delete(clientId);
    return this.members.size;
  }

  /** The clients fed here (to cut them when the session moves). */
  clientIds(): string[] {
    return [...this.members.keys()];
  }

  close(): void {
    this.closed = true;
    this.unlisten?.();
    this.members.clear();
    this.caughtUp();
    void this.messages?.close();
  }
}
