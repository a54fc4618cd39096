import { describe, expect, it } from 'vitest';
// @ts-expect-error: the bench is plain JavaScript (no declarations); its pure helpers are tested here.
import { doublingSearch, overhead, percentile, summarize } from '../bench/lib/stats.mjs';
// @ts-expect-error: plain JavaScript, as above
import { holdsUpTo, marksOf, tally } from '../bench/lib/frame-count.mjs';
// @ts-expect-error: plain JavaScript, as above
import { viaPort } from '../bench/lib/cut-proxy.mjs';

describe('bench statistics', () => {
  it('takes percentiles by nearest rank', () => {
    const s = Float64Array.from([5, 1, 4, 2, 3, 6, 7, 8, 9, 10]).sort();
    expect(percentile(s, 50)).toBe(5);
    expect(percentile(s, 99)).toBe(10);
    expect(percentile(new Float64Array(), 50)).toBeNaN();
    expect(summarize([3, 1, 2])).toMatchObject({ n: 3, p50: 2, p99: 3, max: 3, mean: 2 });
  });

  it('prices the overhead as the difference of p50s and of p99s', () => {
    expect(overhead({ p50: 180, p99: 400 }, { p50: 60, p99: 100 })).toEqual({ p50: 120, p99: 300 });
    expect(overhead({ p50: 180, p99: 400 }, undefined).p50).toBeNaN();
  });

  it('doubles until the figure is worse than at the start, and says where it held', async () => {
    const p99 = (n: number) => (n <= 8 ? 100 + n : 250);
    const seen: number[] = [];
    const r = await doublingSearch(async (n: number) => (seen.push(n), p99(n)), {
      start: 1,
      cap: 512,
      worse: (v: number, base: number) => v > 2 * base,
    });
    expect(seen).toEqual([1, 2, 4, 8, 16]);
    expect(r).toMatchObject({ held: 8, brokeAt: 16 });
  });

  it('stops at the cap (last step exactly the cap), on an error, and when told to', async () => {
    const flat = await doublingSearch(async () => 1, { start: 1, cap: 12, worse: () => false });
    expect(flat.steps.map((s: { n: number }) => s.n)).toEqual([1, 2, 4, 8, 12]);
    expect(flat).toMatchObject({ held: 12, brokeAt: undefined });
    const failing = await doublingSearch(
      async (n: number) => {
        if (n === 4) throw new Error('engine did not start');
        return 1;
      },
      { cap: 64, worse: () => false },
    );
    expect(failing).toMatchObject({ held: 2, brokeAt: 4 });
    expect(failing.steps[2]).toEqual({ n: 4, error: 'engine did not start' });
    let calls = 0;
    const cut = await doublingSearch(async () => ++calls, { cap: 64, worse: () => false, keepGoing: () => calls < 2 });
    expect(cut.steps).toHaveLength(2);
    await expect(doublingSearch(async () => 1, { start: 4, cap: 2, worse: () => false })).rejects.toThrow(/bad bounds/);
  });
});

describe('bench frame counting', () => {
  it('reads the stream marks of a frame line, escaped in an envelope or not', () => {
    expect(marksOf('{"type":"assistant","message":{"content":[{"type":"text","text":"~i=41~t=123.5~xxx"}]}}')).toEqual({ i: 41, t: 123.5 });
    expect(marksOf('{"type":"assistant","message":{"content":"ping 3"}}')).toBeUndefined();
  });

  it('counts missing and doubled frames, and whether a prefix is complete', () => {
    const got = new Map([
      [0, 1],
      [1, 2],
      [3, 1],
    ]);
    expect(tally(got, 5)).toEqual({ missing: 2, doubled: 1 });
    expect(holdsUpTo(got, 1)).toBe(true);
    expect(holdsUpTo(got, 3)).toBe(false);
  });

  it('points a URL at the cut proxy’s port', () => {
    expect(viaPort('ws://127.0.0.1:4100', 5200)).toBe('ws://127.0.0.1:5200');
    expect(viaPort('grpc://127.0.0.1:4101', 5201)).toBe('grpc://127.0.0.1:5201');
  });
});
