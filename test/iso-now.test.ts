/** isoNow (core/util/iso-now.ts): the time as toISOString writes it, formatted once per millisecond. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isoNow } from '../core/util/iso-now.js';

describe('isoNow', () => {
  afterEach(() => vi.useRealTimers());

  it('is new Date().toISOString() at every millisecond, however often it is asked', () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-12-01T10:00:00.000Z'));
    expect(isoNow()).toBe('2026-12-01T10:00:00.000Z');
    expect(isoNow()).toBe('2026-12-01T10:00:00.000Z');
    vi.setSystemTime(new Date('2026-12-01T10:00:00.001Z'));
    expect(isoNow()).toBe('2026-12-01T10:00:00.001Z');
    vi.setSystemTime(new Date('2025-01-01T00:00:00.001Z')); // the clock stepped back: still the clock's time
    expect(isoNow()).toBe(new Date().toISOString());
  });
});
