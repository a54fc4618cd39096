import { TetherError } from '../errors.js';

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** Longest token lifetime `tether token` mints. */
export const MAX_TTL_SECONDS = 366 * 86_400;

/** Parses a lifetime like `90s`, `15m`, `1h`, `30d` (a bare number is seconds) into seconds. */
export function parseTtl(text: string): number {
  const m = /^(\d{1,9})([smhd]?)$/.exec(text.trim());
  if (!m) throw new TetherError('INVALID_ARGUMENT', `--ttl must be a number with a unit s, m, h or d (e.g. 1h), got "${text}"`);
  const seconds = Number(m[1]) * UNIT_SECONDS[m[2] || 's'];
  if (seconds <= 0 || seconds > MAX_TTL_SECONDS)
    throw new TetherError('INVALID_ARGUMENT', `--ttl must be between 1s and ${MAX_TTL_SECONDS / 86_400}d, got "${text}"`);
  return seconds;
}
