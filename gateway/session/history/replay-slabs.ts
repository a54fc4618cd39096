/**
 * Where the replay log keeps its large frames: copied into a few big Buffers ("slabs") that
 * are reused as the log turns over, instead of each frame keeping a Buffer of its own.
 *
 * Why: a frame of more than 4 KB is its own allocation outside V8's heap. The log keeps a
 * session's newest frames (8 MiB), long enough for V8 to move them to its old generation, and
 * there a dead one is only freed by a full mark-compact, which V8 starts after a few MB of such
 * garbage; each one costs in proportion to the whole live heap. At 100 KB frames that was a
 * quarter to nearly half of the gateway's time. Slabs that are reused are never garbage.
 *
 * Contract: `keep` copies the bytes and returns a view that stays valid until `release` is
 * called for it; views must be released in the order they were kept (the log evicts oldest
 * first). A view must not be handed to anything that may outlive its release (a socket's send
 * queue): hand out a copy ({@link ReplaySlabs.copyOut}).
 */
export interface SlabView {
  /** The kept bytes (a view into a slab). */
  readonly bytes: Buffer;
  /** The slab it lives in, for release. */
  readonly slab: Slab;
}

interface Slab {
  readonly buf: Buffer;
  used: number;
  /** Views kept in it and not yet released. */
  live: number;
}

/** Frames from this size on go into slabs; smaller ones share Node's pool and stay as they are. */
export const SLAB_MIN_FRAME_BYTES = 4 * 1024;
/** Largest slab; a frame larger than this keeps its own Buffer. */
export const MAX_SLAB_BYTES = 1024 * 1024;
/** Smallest slab: a session with a few large frames does not hold much more than them. */
const MIN_SLAB_BYTES = 64 * 1024;

export class ReplaySlabs {
  /** Slabs holding live views, oldest first; the last one is being filled. */
  private slabs: Slab[] = [];
  /** One emptied slab kept for reuse. */
  private spare: Buffer | undefined;
  /** Size of the next slab allocated: doubles up to MAX_SLAB_BYTES as the log fills. */
  private nextSize = MIN_SLAB_BYTES;

  /** Whether a frame of `n` bytes goes into a slab. */
  static fits(n: number): boolean {
    return n >= SLAB_MIN_FRAME_BYTES && n <= MAX_SLAB_BYTES;
  }

  /** Copies `pieces` (of `n` bytes in all, a size {@link fits} accepts) into a slab, one after the other. */
  keep(pieces: readonly Uint8Array[], n: number): SlabView {
    let slab = this.slabs[this.slabs.length - 1];
    if (!slab || slab.buf.length - slab.used < n) {
      slab = { buf: this.take(n), used: 0, live: 0 };
      this.slabs.push(slab);
    }
    const view = slab.buf.subarray(slab.used, slab.used + n);
    let at = 0;
    for (const piece of pieces) {
      view.set(piece, at);
      at += piece.byteLength;
    }
    slab.used += n;
    slab.live++;
    return { bytes: view, slab };
  }

  /**
   * One view is no longer used. A slab with none left is kept as the spare, or, while it is the
   * one being filled, filled again from its start (else it would stay, empty, once a new slab
   * follows it: no view would ever release it).
   */
  release(view: SlabView): void {
    const slab = view.slab;
    slab.live--;
    if (slab.live > 0) return;
    if (slab === this.slabs[this.slabs.length - 1]) {
      slab.used = 0;
      return;
    }
    this.slabs.splice(this.slabs.indexOf(slab), 1);
    if (!this.spare || this.spare.length < slab.buf.length) this.spare = slab.buf;
  }

  /** A copy of a kept view that may go anywhere (a replay to a client). */
  static copyOut(bytes: Buffer): Buffer {
    return Buffer.from(bytes);
  }

  /** Bytes of slabs held (live and spare), for tests and memory accounting. */
  get heldBytes(): number {
    return this.slabs.reduce((n, s) => n + s.buf.length, 0) + (this.spare?.length ?? 0);
  }

  private take(n: number): Buffer {
    if (this.spare && this.spare.length >= n) {
      const buf = this.spare;
      this.spare = undefined;
      return buf;
    }
    const size = Math.min(MAX_SLAB_BYTES, Math.max(this.nextSize, n * 2));
    this.nextSize = Math.min(MAX_SLAB_BYTES, size * 2);
    return Buffer.allocUnsafe(Math.max(size, n));
  }
}
