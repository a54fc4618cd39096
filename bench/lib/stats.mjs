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

/**
 * Tether's added latency over a baseline, from the two distributions of one run: the
 * difference of their p50s and of their p99s (not a per-sample difference: the samples of the
 * two paths are not paired). Inputs are `summarize` outputs; NaN where either is missing.
 */
export function overhead(ours, base) {
  const d = (k) => (Number.isFinite(ours?.[k]) && Number.isFinite(base?.[k]) ? ours[k] - base[k] : NaN);
  return { p50: d('p50'), p99: d('p99') };
}

/**
 * The doubling search of the sessions-per-agent figure: measures `start`, then ×`factor`
 * up to `cap`, and stops after the first step where `worse(value, baseline)` holds (the
 * baseline is the first step's value). `measure(n)` resolves with a number; a step that
 * throws ends the search with that step's error recorded. Resolves with every step, the
 * largest n that was not worse (`held`) and the first that was (`brokeAt`, or undefined).
 */
export async function doublingSearch(measure, { start = 1, cap, factor = 2, worse, keepGoing = () => true }) {
  if (!(start >= 1) || !(cap >= start) || !(factor > 1))
    throw new Error(`doublingSearch: bad bounds start ${start}, cap ${cap}, factor ${factor}`);
  const steps = [];
  let held;
  let brokeAt;
  for (let n = start; n <= cap && keepGoing(); n = n === cap ? cap + 1 : Math.min(cap, n * factor)) {
    let value;
    try {
      value = await measure(n);
    } catch (err) {
      steps.push({ n, error: err instanceof Error ? err.message : String(err) });
      brokeAt = n;
      break;
    }
    steps.push({ n, value });
    if (steps.length > 1 && worse(value, steps[0].value)) {
      brokeAt = n;
      break;
    }
    held = n;
  }
  return { steps, held, brokeAt };
}
