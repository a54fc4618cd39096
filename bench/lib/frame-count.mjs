/**
 * Counting the stand-in engine's stream frames at a client (bench/echo-engine.mjs stamps each
 * with `~i=<index>~t=<hrtime µs>~`): which arrived, how often, whether a prefix is complete.
 * `got` maps a frame's index to how many times it arrived.
 */

const MARKS = /~i=(\d+)~t=([\d.]+)~/;

/** The index and engine timestamp (µs) of a stream frame's line, or undefined for any other line. */
export function marksOf(line) {
  const m = MARKS.exec(line);
  return m ? { i: Number(m[1]), t: Number(m[2]) } : undefined;
}

/** Frames 0..count-1: how many never came, how many extra copies came. */
export function tally(got, count) {
  let missing = 0;
  let doubled = 0;
  for (let i = 0; i < count; i++) {
    const c = got.get(i) ?? 0;
    if (c === 0) missing++;
    else doubled += c - 1;
  }
  return { missing, doubled };
}

/** Whether every frame 0..last has arrived. */
export function holdsUpTo(got, last) {
  for (let i = 0; i <= last; i++) if (!got.has(i)) return false;
  return true;
}
