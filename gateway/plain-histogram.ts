import type { HistogramConfiguration, Metric } from 'prom-client';

/**
 * A Prometheus histogram without labels whose `observe` only adds to plain numbers, for one
 * observation per relayed frame: prom-client's own costs about a microsecond a call (label
 * checks, hashing), more than the rest of relaying a small frame. The registry reads it at
 * scrape time and writes the same text as prom-client's Histogram (test/plain-histogram.test.ts).
 */
export class PlainHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  /** Observations per bucket, not cumulative; the last is above every bound (+Inf). */
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;
  /** After reset() and before the next observation there is no series (as prom-client writes it). */
  private noSeries = false;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly upperBounds: readonly number[],
    registers: NonNullable<HistogramConfiguration<string>['registers']>,
  ) {
    this.counts = new Float64Array(upperBounds.length + 1);
    for (const r of registers) r.registerMetric(this as unknown as Metric);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    let i = 0;
    while (i < this.upperBounds.length && value > this.upperBounds[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
    this.noSeries = false;
  }

  /** What the registry writes: the cumulative buckets, then the sum and the count. */
  get(): {
    name: string;
    help: string;
    type: 'histogram';
    aggregator: 'sum';
    values: { metricName: string; labels: Record<string, string | number>; value: number }[];
  } {
    if (this.noSeries) return { name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values: [] };
    let cumulative = 0;
    const values = this.upperBounds.map((le, i) => ({
      metricName: `${this.name}_bucket`,
      labels: { le } as Record<string, string | number>,
      value: (cumulative += this.counts[i]),
    }));
    values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf' }, value: this.count });
    values.push(
      { metricName: `${this.name}_sum`, labels: {}, value: this.sum },
      { metricName: `${this.name}_count`, labels: {}, value: this.count },
    );
    return { name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values };
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
    this.noSeries = true;
  }
}
