/**
 * What the agent keeps of the engine's stderr (threats.md G4): a fixed ring of the last bytes,
 * and a rate-limited debug log of its lines. Neither ever blocks or grows with the input.
 */
import type { Logger } from '../core/logging.js';
import { safePreview } from './line-splitter.js';

/** Default ring size: 64 KiB (threats.md part 3). */
export const DEFAULT_STDERR_TAIL_BYTES = 64 * 1024;

/**
 * A ring buffer holding the last `capacity` bytes written to it. Memory is allocated once;
 * pushing any amount costs at most one copy of `capacity` bytes.
 */
export class StderrTail {
  /** Allocated on the first byte: most engines never write stderr (64 KiB per idle session otherwise). */
  private ringBuf: Buffer | undefined;
  private pos = 0;
  private total = 0;

  constructor(readonly capacity: number = DEFAULT_STDERR_TAIL_BYTES) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`stderr tail capacity must be a positive integer, got ${capacity}`);
    }
  }

  private get ring(): Buffer {
    return (this.ringBuf ??= Buffer.alloc(this.capacity));
  }

  /** Bytes ever pushed (not only those kept). */
  get totalBytes(): number {
    return this.total;
  }

  /** Appends a chunk, overwriting the oldest bytes once the ring is full. */
  push(chunk: Uint8Array): void {
    const cap = this.capacity;
    this.total += chunk.length;
    if (chunk.length >= cap) {
      this.ring.set(chunk.subarray(chunk.length - cap));
      this.pos = 0;
      return;
    }
    const first = Math.min(chunk.length, cap - this.pos);
    this.ring.set(chunk.subarray(0, first), this.pos);
    if (first < chunk.length) this.ring.set(chunk.subarray(first), 0);
    this.pos = (this.pos + chunk.length) % cap;
  }

  /** The kept bytes in order. */
  bytes(): Buffer {
    if (this.total === 0) return Buffer.alloc(0);
    if (this.total < this.capacity) return Buffer.from(this.ring.subarray(0, this.total));
    return Buffer.concat([this.ring.subarray(this.pos), this.ring.subarray(0, this.pos)], this.capacity);
  }

  /**
   * The kept bytes as text (invalid UTF-8 becomes U+FFFD). When older bytes were dropped, a
   * partial character at the cut is dropped too. Not escaped: treat it as untrusted text.
   */
  text(): string {
    let buf = this.bytes();
    if (this.total > this.capacity) {
      let skip = 0;
      while (skip < 3 && skip < buf.length && (buf[skip]! & 0xc0) === 0x80) skip++;
      buf = buf.subarray(skip);
    }
    return buf.toString('utf8');
  }
}

const LOG_LINE_PREFIX_BYTES = 512;

/**
 * Logs engine stderr lines at debug level, at most `linesPerSecond` per second, each cut to a
 * safe preview; when lines were skipped, one "suppressed" record says how many windows dropped
 * output. Does nothing (not even splitting) when debug logging is off.
 */
export class StderrLogSampler {
  private windowStart = 0;
  private inWindow = 0;
  private suppressed = 0;
  private current: Buffer[] = [];
  private currentBytes = 0;

  constructor(
    private readonly logger: Logger,
    private readonly linesPerSecond = 50,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Feeds one stderr chunk. */
  push(chunk: Buffer): void {
    if (!this.logger.isLevelEnabled('debug')) return;
    let start = 0;
    while (start < chunk.length) {
      if (!this.allow()) {
        // Over budget: skip the rest of this chunk cheaply, keep only the partial last line.
        const last = chunk.lastIndexOf(0x0a);
        if (last >= start) this.reset();
        this.keep(chunk.subarray(last >= start ? last + 1 : start));
        return;
      }
      const nl = chunk.indexOf(0x0a, start);
      if (nl === -1) {
        this.keep(chunk.subarray(start));
        return;
      }
      this.keep(chunk.subarray(start, nl));
      this.logLine();
      start = nl + 1;
    }
  }

  /** Logs a final line without `\n`, if any. */
  end(): void {
    if (this.currentBytes > 0 && this.logger.isLevelEnabled('debug') && this.allow()) this.logLine();
    this.reset();
  }

  private allow(): boolean {
    const t = this.now();
    if (t - this.windowStart >= 1000) {
      if (this.suppressed > 0) {
        this.logger.debug({ suppressedChunks: this.suppressed }, 'engine stderr: output suppressed (rate limit)');
      }
      this.windowStart = t;
      this.inWindow = 0;
      this.suppressed = 0;
    }
    if (this.inWindow < this.linesPerSecond) return true;
    this.suppressed++;
    return false;
  }

  private keep(piece: Buffer): void {
    if (this.currentBytes >= LOG_LINE_PREFIX_BYTES || piece.length === 0) return;
    const part = piece.subarray(0, LOG_LINE_PREFIX_BYTES - this.currentBytes);
    this.current.push(Buffer.from(part));
    this.currentBytes += part.length;
  }

  private logLine(): void {
    this.inWindow++;
    const text = Buffer.concat(this.current, this.currentBytes).toString('utf8').replace(/\r$/, '');
    this.reset();
    this.logger.debug({ stderr: safePreview(text) }, 'engine stderr');
  }

  private reset(): void {
    this.current = [];
    this.currentBytes = 0;
  }
}
