import type { SessionRecord, SessionStore, StoredFrame, StoredInput, StoredSession } from '../../gateway/session/session-store.js';
import type { RoleDecisions } from '../../gateway/session/session.js';

/**
 * A session store whose writes the test holds and releases: what is appended stays unwritten
 * until `release()` (or at once once `hold` is false), and `whenWritten` answers only then.
 * `showAhead` makes it say "showable" before writing, as the cluster's store does while NATS
 * is briefly away. Keeps what was appended and dropped, in order, for the test to read.
 */
export class HeldStore implements SessionStore {
  readonly kind = 'held';
  readonly isOpen = true;
  readonly frames: { sessionId: string; frame: StoredFrame }[] = [];
  readonly inputs: { sessionId: string; input: StoredInput }[] = [];
  /** Sessions dropped from it, in order. */
  readonly dropped: string[] = [];
  /** Hold writes until release() (true by default). */
  hold = true;
  /** Say yes to whenShowable before the write, as the cluster's store while NATS is away. */
  showAhead = false;
  private appended = 0;
  private written = 0;
  private waiters: { upTo: number; done: () => void }[] = [];

  /** Appends not written yet. */
  get unwritten(): number {
    return this.appended - this.written;
  }

  create(_record: SessionRecord): void {}

  appendFrame(sessionId: string, frame: StoredFrame): void {
    this.frames.push({ sessionId, frame });
    this.appended++;
    if (!this.hold) this.release();
  }

  appendInput(sessionId: string, input: StoredInput): void {
    this.inputs.push({ sessionId, input });
    this.appended++;
    if (!this.hold) this.release();
  }

  whenWritten(done: () => void): void {
    if (this.written >= this.appended) done();
    else this.waiters.push({ upTo: this.appended, done });
  }

  whenShowable(done: () => void): void {
    if (this.showAhead) done();
    else this.whenWritten(done);
  }

  /** Writes everything appended so far and answers the waiters, in the order they asked. */
  release(): void {
    this.written = this.appended;
    const ready = this.waiters.filter((w) => w.upTo <= this.written);
    this.waiters = this.waiters.filter((w) => w.upTo > this.written);
    for (const w of ready) w.done();
  }

  saveRoles(_sessionId: string, _roles: RoleDecisions): void {}
  drop(sessionId: string): void {
    this.dropped.push(sessionId);
  }
  loadAll(): StoredSession[] {
    return [];
  }
  close(): void {}
}
