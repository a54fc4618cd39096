/** Small statistics helpers: percentiles over samples, medians with min–max over runs. */

export function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx];
}

export function summarize(samples) {
  const s = Float64Array.from(samples).sort();
  return {
    n: s.length,
    p50: percentile(s, 50),
    p99: percentile(s, 99),
    max: s.length ? s[s.length - 1] : NaN,
    mean: s.reduce((a, b) => a + b, 0) / (s.length || 1),
  };
}

/** Median, min and max of a list of run results. */
export function spread(values) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return { median: NaN, min: NaN, max: NaN, runs: [] };
  const mid = v.length >> 1;
  const median = v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  return { median, min: v[0], max: v[v.length - 1], runs: values };
}
