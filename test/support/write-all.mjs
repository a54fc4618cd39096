// Synchronous, whole writes to a file descriptor, for the stand-in engines: they must write
// every byte of a line before doing anything else, as the real CLI's stdout does.
import { writeSync } from 'node:fs';

/** Writes all of `buf` to `fd`, spinning on EAGAIN (a non-blocking pipe whose reader is behind). */
export function writeAll(fd, buf) {
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(fd, buf, off, buf.length - off);
    } catch (e) {
      if (e.code === 'EAGAIN') continue; // non-blocking pipe: spin until the reader catches up
      throw e;
    }
  }
}
