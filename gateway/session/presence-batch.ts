import { tetherEvent, type PresenceChange, type TetherEvent } from '../../core/protocol/events.js';
import { compactMore } from '../../core/protocol/presence.js';

/**
 * How long presence changes may wait to be coalesced, per member who will receive them: a
 * session of M members sends at most one presence event per M ms, so presence costs each
 * session about one frame delivery per millisecond however many members attach at once (a
 * burst of N attaches costs O(N) deliveries, not N²/2).
 */
export const PRESENCE_WAIT_MS_PER_MEMBER = 1;
/** The longest a presence change waits, however large the session. */
export const PRESENCE_MAX_WAIT_MS = 1_000;
/** Changes one event carries at most (an event of 500 is ~60 KB); more go out at once. */
export const PRESENCE_MAX_CHANGES = 500;

/**
 * The presence changes of one session, held briefly and appended as one `presence` event
 * (the first change at its top level, the rest in `more`, each without the fields it shares
 * with the change before it: every member gets every change, so a burst's bytes count N
 * times). A change after a quiet spell goes out at once (before the attach answer, say);
 * later ones wait until the window since the last event has passed and go out together. The
 * history flushes them before numbering any other frame (see SessionHistory.holdBack), so
 * every client sees changes and frames in the order they happened, and a replay gives the
 * same member list as the live stream did.
 */
export class PresenceBatch {
  private held: PresenceChange[] = [];
  private timer: NodeJS.Timeout | undefined;
  private lastAt = -Infinity;

  /** `append` numbers and sends one event; `members` is how many clients will receive it. */
  constructor(
    private readonly append: (event: TetherEvent) => void,
    private readonly members: () => number,
  ) {}

  add(change: PresenceChange): void {
    this.held.push(change);
    if (this.held.length >= PRESENCE_MAX_CHANGES) return this.flush();
    if (this.timer) return;
    const windowMs = Math.min(PRESENCE_MAX_WAIT_MS, this.members() * PRESENCE_WAIT_MS_PER_MEMBER);
    const waitMs = this.lastAt + windowMs - performance.now();
    if (waitMs <= 0) return this.flush(); // after a quiet spell: at once, as part of the change itself
    this.timer = setTimeout(() => this.flush(), waitMs);
    this.timer.unref(); // a closing gateway does not wait for it: its store takes no frames then
  }

  /** The session is gone (dropped from the gateway): held changes are dropped, nothing is appended later. */
  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.held = [];
  }

  /** Appends the held changes as one event now (nothing when none are held). */
  flush(): void {
    if (this.held.length === 0) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    const [first, ...more] = this.held;
    this.held = [];
    this.lastAt = performance.now();
    this.append(tetherEvent({ subtype: 'presence', ...first, ...(more.length ? { more: compactMore(first, more) } : {}) }));
  }
}
