/**
 * Large byte strings copied into a few big Buffers ("slabs") that are reused as their contents
 * are released, instead of each keeping a Buffer of its own.
 *
 * Why: a Buffer of more than 4 KB is its own allocation outside V8's heap. One that lives a
 * while (a replay log's frames, a slow reader's queue) is moved to V8's old generation, and
 * there a dead one is only freed by a full mark-compact, which V8 starts after a few MB of such
 * memory; each one costs in proportion to the whole live heap. Slabs that are reused are
 * never garbage.
 *
 * Contract: `keep` copies the bytes and returns a view with one reference; `retain` adds one,
 * `release` drops one. A slab is reused once no view in it has a reference left, so a view
 * must not be read after its last release: hand out a copy to anything that may outlive it.
 * `forsake` is for a view something may still read at an unknown time: its slab is never
 * reused (it is garbage once nothing refers to it).
 */
export interface SlabView {
  /** The kept bytes (a view into a slab). */
  readonly bytes: Buffer;
  /** The slab it lives in, for retain and release. */
  readonly slab: Slab;
}

interface Slab {
  readonly buf: Buffer;
  used: number;
  /** References to views kept in it. */
  live: number;
}

/** Bytes from this size on go into slabs; smaller ones share Node's pool and stay as they are. */
export const SLAB_MIN_BYTES = 4 * 1024;
/** Largest slab; larger byte strings keep their own Buffer. */
export const MAX_SLAB_BYTES = 1024 * 1024;
/** Smallest slab: a holder of a few large frames does not hold much more than them. */
const MIN_SLAB_BYTES = 64 * 1024;

export class Slabs {
  /** Slabs holding referenced views, oldest first; the last one is being filled. */
  private slabs: Slab[] = [];
  /** Emptied slabs kept for reuse, at most `maxSpares`. */
  private readonly spares: Buffer[] = [];
  /** Size of the next slab allocated: doubles up to MAX_SLAB_BYTES as they fill. */
  private nextSize = MIN_SLAB_BYTES;

  /** `maxSpares`: emptied slabs kept for reuse (a holder whose backlog swings keeps more). */
  constructor(private readonly maxSpares = 1) {}

  /** Whether `n` bytes go into a slab. */
  static fits(n: number): boolean {
    return n >= SLAB_MIN_BYTES && n <= MAX_SLAB_BYTES;
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

  /** One more reference to a view (it must still have one). */
  retain(view: SlabView): void {
    view.slab.live++;
  }

  /**
   * Drops one reference. A slab with none left is kept as a spare, or, while it is the one
   * being filled, filled again from its start (else it would stay, empty, once a new slab
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
    const i = this.slabs.indexOf(slab);
    if (i < 0) return; // forsaken
    this.slabs.splice(i, 1);
    if (this.spares.length < this.maxSpares) this.spares.push(slab.buf);
    else {
      // Full: the larger slab is the one worth keeping.
      const smallest = this.spares.reduce((m, b, j) => (b.length < this.spares[m]!.length ? j : m), 0);
      if (this.spares[smallest]!.length < slab.buf.length) this.spares[smallest] = slab.buf;
    }
  }

  /** The view's slab is never reused: something may still read it. */
  forsake(view: SlabView): void {
    const i = this.slabs.indexOf(view.slab);
    if (i >= 0) this.slabs.splice(i, 1);
  }

  /** Bytes of slabs held (in use and spare), for tests and memory accounting. */
  get heldBytes(): number {
    return this.slabs.reduce((n, s) => n + s.buf.length, 0) + this.spares.reduce((n, b) => n + b.length, 0);
  }

  private take(n: number): Buffer {
    const i = this.spares.findIndex((b) => b.length >= n);
    if (i >= 0) return this.spares.splice(i, 1)[0]!;
    const size = Math.min(MAX_SLAB_BYTES, Math.max(this.nextSize, n * 2));
    this.nextSize = Math.min(MAX_SLAB_BYTES, size * 2);
    return Buffer.allocUnsafe(Math.max(size, n));
  }
}
