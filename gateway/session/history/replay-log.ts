import { TetherError } from '../../../core/errors.js';
import { ReplaySlabs, type SlabView } from './replay-slabs.js';
import { TextPieces } from '../../../core/wire/text-pieces.js';
import { frameBuffer, frameByteLength, type FrameBytes } from '../../../core/wire/session-frame.js';

export interface ReplayEntry {
  seq: number;
  /** The `session.frame` notification as UTF-8 JSON, encoded once for every client. */
  bytes: Buffer;
}

export interface ReplayLogLimits {
  maxFrames: number;
  maxBytes: number;
}

/** Defaults from threats.md part 3: 10,000 frames or 8 MiB per session, whichever first. */
export const REPLAY_DEFAULTS: ReplayLogLimits = { maxFrames: 10_000, maxBytes: 8 * 1024 * 1024 };

/** An entry as held: large frames live in the log's slabs (see replay-slabs.ts). */
interface HeldEntry extends ReplayEntry {
  kept?: SlabView;
}

/**
 * A session's bounded history: the newest frames, oldest evicted first. Asking for a
 * position it no longer holds is a typed gap error, never a silent skip. Large frames are held
 * as copies in recycled slabs (replay-slabs.ts) and handed out as fresh copies, so a slab a
 * socket may still be sending from is never reused; an evicted frame is not kept alive.
 */
export class ReplayLog {
  /** Live entries from `head` on; evicted slots before it are emptied at once. */
  private entries: (HeldEntry | undefined)[] = [];
  private readonly slabs = new ReplaySlabs();
  private head = 0; // index of the oldest live entry in `entries`
  private bytes = 0;
  private last = 0;

  constructor(private readonly limits: ReplayLogLimits = REPLAY_DEFAULTS) {}

  /** Bytes of the slabs holding its large frames (ReplaySlabs), for memory accounting. */
  get slabBytes(): number {
    return this.slabs.heldBytes;
  }

  /** Highest seq appended so far (0 before the first). */
  get lastSeq(): number {
    return this.last;
  }

  /** Lowest seq still held, or lastSeq + 1 when empty. */
  get firstSeq(): number {
    return this.head < this.entries.length ? this.entries[this.head]!.seq : this.last + 1;
  }

  /**
   * The next entry will carry `seq`: for a log restored without its oldest frames, or one
   * whose source skipped frames. Whatever is held is dropped, so the log never has a hole
   * and asking for a position before `seq` is a gap.
   */
  restartAt(seq: number): void {
    if (seq <= this.last) throw new TetherError('INTERNAL', `replay log cannot restart at ${seq}: it is at ${this.last}`);
    for (let i = this.head; i < this.entries.length; i++) {
      const kept = this.entries[i]?.kept;
      if (kept) this.slabs.release(kept);
    }
    this.entries = [];
    this.head = 0;
    this.bytes = 0;
    this.last = seq - 1;
  }

  /** Appends the next frame (large ones are copied: the caller may hand `bytes` to sockets meanwhile). */
  append(entry: { seq: number; bytes: FrameBytes }): void {
    if (entry.seq !== this.last + 1) throw new TetherError('INTERNAL', `replay log expected seq ${this.last + 1}, got ${entry.seq}`);
    const { seq, bytes } = entry;
    const n = frameByteLength(bytes);
    const kept = ReplaySlabs.fits(n) ? this.slabs.keep(bytes instanceof TextPieces ? bytes.pieces : [bytes], n) : undefined;
    this.entries.push(kept ? { seq, bytes: kept.bytes, kept } : { seq, bytes: frameBuffer(bytes) });
    this.bytes += n;
    this.last = seq;
    while (
      this.entries.length - this.head > this.limits.maxFrames ||
      (this.bytes > this.limits.maxBytes && this.entries.length - this.head > 1)
    ) {
      const old = this.entries[this.head]!;
      this.entries[this.head++] = undefined; // not kept alive until the next compaction
      this.bytes -= old.bytes.length;
      if (old.kept) this.slabs.release(old.kept);
    }
    // Compact occasionally so the array does not grow without bound.
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * Entries with seq >= from, in order. Throws OUT_OF_RANGE-style FAILED_PRECONDITION
   * (`gap`) when `from` is older than what is held, INVALID_ARGUMENT when it is in the future.
   */
  since(from: number): ReplayEntry[] {
    if (from > this.last + 1) {
      throw new TetherError('INVALID_ARGUMENT', `resume position ${from} is beyond the last frame (${this.last})`, { last_seq: this.last });
    }
    if (from < this.firstSeq) {
      throw new TetherError('FAILED_PRECONDITION', `frames ${from}..${this.firstSeq - 1} are no longer held (gap)`, {
        gap: true,
        from_seq: from,
        to_seq: this.firstSeq - 1,
      });
    }
    const out: ReplayEntry[] = [];
    for (let i = this.head + (from - this.firstSeq); i < this.entries.length; i++) {
      const e = this.entries[i]!;
      out.push(e.kept ? { seq: e.seq, bytes: ReplaySlabs.copyOut(e.bytes) } : e);
    }
    return out;
  }
}
