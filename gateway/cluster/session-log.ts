import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { readLogRecord } from '../session/session-store.js';
import type { Logger } from '../../core/logging.js';
import { DropLog, MAC_HEADER, type FabricMac, type FabricMessage } from './fabric-mac.js';
import type { NatsLink } from './nats-link.js';

/*
 * A session's log in JetStream: the file store's records (gateway/session/session-store.ts), in
 * order, as messages on the session's own subject of one stream. Written by one LogWriter per
 * session at its home gateway, read back whole (readSessionLog: a takeover) or followed
 * (SessionMirror: clients on other gateways).
 */

/** The one stream of session logs: subject `tether.s.<session id>` per session. */
export const SESSIONS_STREAM = 'TETHER_SESSIONS';
const SUBJECT_PREFIX = 'tether.s.';
/** Session logs older than this leave the stream (a week). */
export const STREAM_MAX_AGE_MS = 7 * 24 * 3600_000;
/** The stream's size bound (1 GiB); the oldest messages go first. */
export const STREAM_MAX_BYTES = 1024 ** 3;
/** JetStream drops a re-sent message with the same id within this window (a retry after a cut). */
export const DUPLICATE_WINDOW_MS = 2 * 60_000;
/** Bytes of one published message (at most the server's max_payload less room for headers). */
const MAX_MESSAGE_BYTES = 512 * 1024;
/** Header on every part of a record split over several messages but its first. */
export const CONTINUATION_HEADER = 'Tether-Cont';

/** The subject of a session's log; ids are checked (letters, digits, dash) before they become subjects. */
export function sessionSubject(id: string): string {
  if (!/^[A-Za-z0-9-]+$/.test(id)) throw new Error(`bad session id for the cluster: ${id}`);
  return SUBJECT_PREFIX + id;
}

/** Creates the stream (or checks it exists); idempotent across gateways. */
export async function ensureSessionsStream(jsm: JetStreamManager): Promise<void> {
  const config = {
    name: SESSIONS_STREAM,
    subjects: [`${SUBJECT_PREFIX}*`],
    max_age: STREAM_MAX_AGE_MS * 1e6,
    max_bytes: STREAM_MAX_BYTES,
    duplicate_window: DUPLICATE_WINDOW_MS * 1e6,
  };
  try {
    await jsm.streams.info(SESSIONS_STREAM);
  } catch {
    await jsm.streams.add(config);
  }
}

/** A record waiting to be published, with its number (the store counts acknowledged ones). */
interface Queued {
  bytes: Buffer;
  unit: number;
}

/** Where a LogWriter publishes: the store, which counts what JetStream acknowledged. */
export interface LogSink {
  /** Whether writing stops for good (the store closed, or its link to NATS). */
  readonly stopped: boolean;
  /** One publish; false after a failure (paused first, so the writer just retries). */
  publish(subject: string, body: Buffer, msgID: string, headers: MsgHdrs): Promise<boolean>;
  /** These units (records, by number) are in JetStream, `bytes` of them. */
  settled(units: number[], bytes: number): void;
}

/**
 * One session's log toward JetStream: records in order, published one message at a time (so
 * a retry after a cut can never land behind a later message), several records per message
 * under load (group commit), a record larger than a message split over consecutive messages.
 */
export class LogWriter {
  private queue: Queued[] = [];
  private partial: { rest: Buffer; unit: number } | undefined;
  private pumping = false;
  private sent = 0;

  constructor(
    private readonly sink: LogSink,
    private readonly subject: string,
    private readonly idPrefix: string,
    private readonly mac: FabricMac,
  ) {}

  push(record: Buffer, unit: number): void {
    this.queue.push({ bytes: record, unit });
    void this.pump();
  }

  /** The next message: whole records up to the bound, or the next part of one too large. */
  private take(): { body: Buffer; units: number[]; cont: boolean } {
    if (this.partial) {
      const { rest, unit } = this.partial;
      const body = rest.subarray(0, MAX_MESSAGE_BYTES);
      this.partial = rest.length > MAX_MESSAGE_BYTES ? { rest: rest.subarray(MAX_MESSAGE_BYTES), unit } : undefined;
      return { body, units: this.partial ? [] : [unit], cont: true };
    }
    const first = this.queue[0];
    if (first.bytes.length > MAX_MESSAGE_BYTES) {
      this.queue.shift();
      this.partial = { rest: first.bytes.subarray(MAX_MESSAGE_BYTES), unit: first.unit };
      return { body: first.bytes.subarray(0, MAX_MESSAGE_BYTES), units: [], cont: false };
    }
    const parts: Buffer[] = [];
    const units: number[] = [];
    let size = 0;
    while (this.queue.length && size + this.queue[0].bytes.length <= MAX_MESSAGE_BYTES) {
      const q = this.queue.shift()!;
      parts.push(q.bytes);
      units.push(q.unit);
      size += q.bytes.length;
    }
    return { body: Buffer.concat(parts, size), units, cont: false };
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while ((this.queue.length || this.partial) && !this.sink.stopped) {
        const m = this.take();
        const msgID = `${this.idPrefix}-${++this.sent}`;
        // Sealed once per message (the records as they are): a reader drops what no gateway wrote.
        const h = natsHeaders();
        if (m.cont) h.set(CONTINUATION_HEADER, '1');
        h.set(MAC_HEADER, this.mac.sealRecord(this.subject, m.body, m.cont));
        // The same id on every retry: JetStream keeps one copy if an ack was lost in a cut.
        while (!(await this.sink.publish(this.subject, m.body, msgID, h))) if (this.sink.stopped) return;
        this.sink.settled(m.units, m.body.length);
      }
    } finally {
      this.pumping = false;
    }
  }
}

/**
 * Reads a session's whole log as it is in the stream now, record by record, and returns when
 * it reached the end. Parts of a record split over messages are joined; a log whose oldest
 * messages aged out starts at the first whole record.
 */
export async function readSessionLog(
  link: NatsLink,
  sessionId: string,
  check: LogCheck,
  onRecord: (r: NonNullable<ReturnType<typeof readLogRecord>>) => void,
): Promise<void> {
  const subject = sessionSubject(sessionId);
  const jsm = await jetstreamManager(link.nc);
  const info = await jsm.streams.info(SESSIONS_STREAM, { subjects_filter: subject });
  if (!info.state.subjects?.[subject]) return;
  const consumer = await jetstream(link.nc).consumers.get(SESSIONS_STREAM, { filter_subjects: subject, deliver_policy: DeliverPolicy.All });
  const reader = new LogReader(check, onRecord);
  const messages = await consumer.consume();
  const stall = setTimeout(() => void messages.close(), LOAD_STALL_MS);
  let complete = false;
  try {
    for await (const m of messages) {
      stall.refresh();
      reader.push(m);
      if (m.info.pending === 0) {
        complete = true;
        break;
      }
    }
  } finally {
    clearTimeout(stall);
    void messages.close();
  }
  if (!complete) throw new Error(`the log of session ${sessionId} stopped before its end (nothing for ${LOAD_STALL_MS} ms)`);
}

/** Reading a log back gives up when no message came for this long. */
const LOAD_STALL_MS = 5_000;

/** How a reader tells a gateway's message from a forged one, and where it reports the latter. */
export interface LogCheck {
  mac: FabricMac;
  log: Logger;
}

/**
 * Turns a log's messages, in order, into records (see LogWriter for the layout). A message
 * no gateway sealed (a client of NATS that is not a gateway published it) is dropped, logged.
 */
export class LogReader {
  private carry: Buffer = Buffer.alloc(0);
  private started = false;
  private readonly forged: DropLog;

  constructor(
    private readonly check: LogCheck,
    private readonly onRecord: (r: NonNullable<ReturnType<typeof readLogRecord>>) => void,
  ) {
    this.forged = new DropLog(check.log, 'dropping a session log message no gateway wrote');
  }

  push(m: FabricMessage): void {
    const continuation = m.headers?.get(CONTINUATION_HEADER) === '1';
    if (!this.check.mac.checkRecord(m, continuation)) {
      this.forged.note({ subject: m.subject, bytes: m.data.length });
      return;
    }
    const data = m.data;
    if (!this.started && continuation) return; // the start of this record aged out of the stream
    this.started = true;
    const bytes = this.carry.length ? Buffer.concat([this.carry, data]) : Buffer.from(data);
    let from = 0;
    for (let nl = bytes.indexOf(10, from); nl >= 0; nl = bytes.indexOf(10, from)) {
      const r = readLogRecord(bytes.subarray(from, nl).toString('utf8'));
      if (r) this.onRecord(r);
      from = nl + 1;
    }
    this.carry = bytes.subarray(from);
  }
}
