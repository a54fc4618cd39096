import { describe, expect, it } from 'vitest';
// @ts-expect-error: the bench is plain JavaScript (no declarations); its pure helpers are tested here.
import { webTable, webVerdicts } from '../bench/web.mjs';

const typed = (keyToPaintP95Ms: number) => ({ longTasks: 0, longestTaskMs: 0, keyToPaintP95Ms });
const session = (turns: number, keyToPaintP95Ms: number) => ({ turns, openMs: 900, deltaMainThreadMs: 8, ...typed(keyToPaintP95Ms) });

describe('the web figure', () => {
  it('reports the control page (the floor) beside the two Tether pages', () => {
    const fig = {
      control: [typed(16), typed(24), typed(16)],
      baseline: [session(2, 24), session(2, 32), session(2, 24)],
      long: [session(2000, 40), session(2000, 48), session(2000, 32)],
    };
    const table = webTable(fig).split('\n');
    expect(table[0]).toBe('| web page | control (no Tether code: the floor) | 2 turns (baseline) | 2,000 turns | target |');
    expect(table.find((l: string) => l.startsWith('| keystroke to paint p95'))).toBe(
      '| keystroke to paint p95, ms | 16.0 | 24.0 | 40.0 | ≤ 50 |',
    );
    // The control page opens nothing and streams no Tether answer: those cells say so.
    expect(table.find((l: string) => l.startsWith('| open'))).toContain('| n/a | 900 | 900 |');
    const key = webVerdicts(fig).find((v: { target: string }) => v.target.startsWith('keystroke'));
    expect(key).toEqual({ target: 'keystroke to paint p95 ≤ 50 ms', value: '40 ms (control page: 16 ms)', met: true });
  });
});
