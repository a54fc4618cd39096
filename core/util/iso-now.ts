/** The millisecond last formatted, and its text. */
let lastMs = Number.NaN;
let lastText = '';

/**
 * `new Date().toISOString()`, formatted once per millisecond: a prompt stamps its audit record
 * and its echo in the same millisecond, and formatting a date costs more than the rest of
 * building either.
 */
export function isoNow(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastText = new Date(ms).toISOString();
  }
  return lastText;
}
