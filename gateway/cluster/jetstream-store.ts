import { randomBytes } from 'node:crypto';
import type { MsgHdrs } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { Logger } from '../../core/logging.js';
import type { RoleDecisions } from '../session/session.js';
import {
  frameRecord,
  inputRecord,
  INPUTS_KEPT,
  type SessionRecord,
  type SessionStore,
  type StoredFrame,
  type StoredInput,
  type StoredSession,
} from '../session/session-store.js';
import type { FabricMac } from './fabric-mac.js';
import type { NatsLink } from './nats-link.js';
import type { ClusterRegistry } from './registry.js';
import { ensureSessionsStream, LogWriter, readSessionLog, SESSIONS_STREAM, sessionSubject, type LogSink } from './session-log.js';

/**
 * Records a gateway holds while NATS is away before it stops showing new frames to clients
 * ahead of JetStream (64 MiB). Acks to agents always wait for JetStream, so what is held is
 * bounded by what agents may leave unacknowledged (64 MiB per session, agent/session-relay.ts).
 */
export const CLUSTER_BUFFER_BYTES = 64 * 1024 * 1024;
/** A publish unanswered this long is sent again (same message id: JetStream keeps one copy). */
const PUBLISH_TIMEOUT_MS = 2_000;
const RETRY_PAUSE_MS = 250;
/** Tries of a registry write that fails while NATS is up (a retry rarely helps then). */
const REGISTRY_ATTEMPTS_WHILE_UP = 5;

/**
 * The cluster's session store: each session's history and inputs are one append-only log in
 * JetStream (subject `tether.s.<id>`, the file store's record layout), its record, home and
 * role decisions in the registry's key-value bucket. Writes are queued and published in the
 * background; `whenWritten` fires once JetStream has acknowledged everything appended before
 * it, and the gateway acks an agent only then. While NATS is away the records wait (retried
 * in order, never dropped) and, up to CLUSTER_BUFFER_BYTES, frames are still shown to local
 * clients (`whenShowable`). Sessions are not read back at start: a gateway loads one when
 * its agent arrives (`load`).
 */
export class JetStreamSessionStore implements SessionStore, LogSink {
  readonly kind = 'jetstream';
  closed = false;
  private readonly js: JetStreamClient;
  private readonly writers = new Map<string, LogWriter>();
  /** Units (records and registry writes) not yet acknowledged, in the order they were made. */
  private readonly outstanding = new Set<number>();
  private nextUnit = 0;
  private heldBytes = 0;
  private flushWaiters: { upTo: number; done: () => void }[] = [];
  /** Writer id: message ids stay unique across gateways and restarts. */
  private readonly writerId = randomBytes(6).toString('hex');
  /** The gateway whose sessions these are (set when the gateway joins). */
  home = '';

  constructor(
    private readonly link: NatsLink,
    private readonly registry: ClusterRegistry,
    private readonly log: Logger,
    private readonly mac: FabricMac,
  ) {
    this.js = jetstream(link.nc, { timeout: PUBLISH_TIMEOUT_MS });
    link.onChange((s) => {
      if (s.kind !== 'up') this.releaseShareWaiters();
    });
  }

  static async open(link: NatsLink, registry: ClusterRegistry, log: Logger, mac: FabricMac): Promise<JetStreamSessionStore> {
    await ensureSessionsStream(await jetstreamManager(link.nc));
    return new JetStreamSessionStore(link, registry, log, mac);
  }

  /** Open until closed, and while its link to NATS is not closed for good. */
  get isOpen(): boolean {
    return !this.closed && !this.linkClosed;
  }

  get linkClosed(): boolean {
    return this.link.state.kind === 'closed';
  }

  /** For LogWriter: writing stops for good. */
  get stopped(): boolean {
    return this.closed || this.linkClosed;
  }

  /** Bytes of records appended but not yet acknowledged by JetStream. */
  get unpublishedBytes(): number {
    return this.heldBytes;
  }

  create(record: SessionRecord): void {
    this.log.debug({ sessionId: record.id, home: this.home }, 'session registered in the cluster');
    this.track(record.id, () => this.registry.putSession({ record, home: this.home, roles: {} }));
  }

  appendFrame(sessionId: string, frame: StoredFrame): void {
    this.append(sessionId, frameRecord(frame));
  }

  appendInput(sessionId: string, input: StoredInput): void {
    this.append(sessionId, Buffer.from(inputRecord(input)));
  }

  saveRoles(sessionId: string, roles: RoleDecisions): void {
    this.track(sessionId, () => this.registry.updateRoles(sessionId, roles));
  }

  /**
   * Another gateway holds the session now: what this gateway's copy still appends (a prompt
   * expiring on a copy it let go of) is not written. `adopted` undoes it when it comes back.
   */
  forget(sessionId: string): void {
    this.forgotten.add(sessionId);
    this.writers.delete(sessionId);
  }

  adopted(sessionId: string): void {
    this.forgotten.delete(sessionId);
  }

  private readonly forgotten = new Set<string>();

  private append(sessionId: string, record: Buffer): void {
    if (this.closed || this.forgotten.has(sessionId)) return;
    let w = this.writers.get(sessionId);
    if (!w) this.writers.set(sessionId, (w = new LogWriter(this, sessionSubject(sessionId), `${this.writerId}-${sessionId}`, this.mac)));
    const unit = ++this.nextUnit;
    this.outstanding.add(unit);
    this.heldBytes += record.length;
    w.push(record, unit);
  }

  /**
   * A write about one session outside its log (registry entry, purge): after the session's
   * earlier ones, counted toward whenWritten like a record. Retried while NATS is away (until
   * the store closes); one that fails with NATS up (too large, conflicts past updateRoles'
   * own retries) is tried REGISTRY_ATTEMPTS_WHILE_UP times, then given up with an error
   * logged, so it never holds up every other session's acks.
   */
  private track(sessionId: string, write: () => Promise<unknown>): void {
    const unit = ++this.nextUnit;
    this.outstanding.add(unit);
    const after = this.sideWrites.get(sessionId) ?? Promise.resolve();
    const done = after.then(async () => {
      for (let failedWhileUp = 0, failed = false; !this.closed && !this.linkClosed; failed = true) {
        try {
          await write();
          return;
        } catch (err) {
          if (this.link.isUp && ++failedWhileUp >= REGISTRY_ATTEMPTS_WHILE_UP) {
            this.log.error(
              { sessionId, err: String(err), attempts: failedWhileUp },
              'cluster registry write failed with NATS up; given up (other gateways may not see this change)',
            );
            return;
          }
          if (!failed) this.log.warn({ sessionId, err: String(err) }, 'cluster registry write failed; retrying');
          await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
        }
      }
    });
    this.sideWrites.set(sessionId, done);
    void done.finally(() => {
      if (this.sideWrites.get(sessionId) === done) this.sideWrites.delete(sessionId);
      this.settled([unit], 0);
    });
  }

  /** The last registry write queued per session (they run one after another). */
  private readonly sideWrites = new Map<string, Promise<void>>();

  /** For LogWriter: one publish; false after a failure (paused first, so the caller just retries). */
  async publish(subject: string, body: Buffer, msgID: string, headers: MsgHdrs): Promise<boolean> {
    try {
      await this.js.publish(subject, body, { msgID, headers });
      if (this.failingSince !== undefined)
        this.log.info({ subject, failedMs: Date.now() - this.failingSince }, 'publishing to JetStream again');
      this.failingSince = undefined;
      return true;
    } catch (err) {
      // One warning per streak of failures (NATS away, stream missing), not one per retry.
      if (!this.closed && this.failingSince === undefined)
        this.log.warn({ subject, err: String(err), held: this.heldBytes }, 'publish to JetStream failed; holding records and retrying');
      this.failingSince ??= Date.now();
      await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
      return false;
    }
  }

  private failingSince: number | undefined;

  /** For LogWriter: these units are in JetStream. */
  settled(units: number[], bytes: number): void {
    for (const u of units) this.outstanding.delete(u);
    this.heldBytes -= bytes;
    if (!this.flushWaiters.length) return;
    const oldest = this.outstanding.values().next();
    const floor = oldest.done ? Infinity : oldest.value;
    const ready = this.flushWaiters.filter((w) => w.upTo < floor);
    this.flushWaiters = this.flushWaiters.filter((w) => w.upTo >= floor);
    for (const w of ready) w.done();
  }

  /** Publishing runs all the time: `done` fires once JetStream acknowledged everything appended so far. */
  whenWritten(done: () => void): void {
    if (!this.outstanding.size) return done();
    this.flushWaiters.push({ upTo: this.nextUnit, done });
  }

  private shareWaiters: (() => void)[] = [];

  /** At once while NATS is away and within CLUSTER_BUFFER_BYTES; else once written. In order: a caller never overtakes one still waiting. */
  whenShowable(done: () => void): void {
    if (!this.link.isUp && this.heldBytes <= CLUSTER_BUFFER_BYTES && !this.shareWaiters.length) return done();
    let fired = false;
    const once = () => {
      if (fired) return;
      fired = true;
      done();
    };
    this.shareWaiters.push(once);
    this.whenWritten(() => {
      this.shareWaiters = this.shareWaiters.filter((w) => w !== once);
      once();
    });
  }

  /** NATS went away: frames already waiting are shown now (within the bound), not after it returns. */
  private releaseShareWaiters(): void {
    if (this.heldBytes > CLUSTER_BUFFER_BYTES) return;
    const waiting = this.shareWaiters;
    this.shareWaiters = [];
    for (const w of waiting) w();
  }

  /** Drops the session's log and its registry entry. */
  drop(sessionId: string): void {
    this.writers.delete(sessionId);
    const subject = sessionSubject(sessionId);
    this.track(sessionId, async () => {
      const jsm = await jetstreamManager(this.link.nc);
      await jsm.streams.purge(SESSIONS_STREAM, { filter: subject });
      await this.registry.deleteSession(sessionId);
    });
  }

  /** Sessions are loaded one by one when their agent arrives (`load`), never all at start. */
  loadAll(): StoredSession[] {
    return [];
  }

  /** Reads a session back: its record and roles from the registry, history and inputs from its log. */
  async load(sessionId: string): Promise<StoredSession | undefined> {
    const entry = await this.registry.getSession(sessionId);
    if (!entry) return undefined;
    const frames: StoredFrame[] = [];
    const inputs: StoredInput[] = [];
    await readSessionLog(this.link, sessionId, { mac: this.mac, log: this.log }, (r) => {
      if ('frame' in r) {
        if (!frames.length || r.frame.seq > frames[frames.length - 1].seq) frames.push(r.frame); // a re-sent message is kept once
      } else if (!inputs.length || r.input.seq > inputs[inputs.length - 1].seq) inputs.push(r.input);
    });
    return { record: entry.value.record, frames, inputs: inputs.slice(-INPUTS_KEPT), roles: entry.value.roles };
  }

  close(): void {
    this.closed = true;
    // Never fired: what they wait for was not acknowledged, and nothing is published any more.
    this.flushWaiters = [];
    this.shareWaiters = [];
  }
}
