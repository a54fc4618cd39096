/**
 * PlainHistogram (gateway/plain-histogram.ts) against prom-client's own Histogram: for the same
 * observations, a registry writes the same text for both (in both content types), so a scraper
 * cannot tell which one the gateway uses for its per-frame relay latency.
 */
import { describe, expect, it } from 'vitest';
import { Histogram, Registry, type OpenMetricsContentType, type PrometheusContentType, type RegistryContentType } from 'prom-client';
import { PlainHistogram } from '../gateway/plain-histogram.js';
import { RELAY_LATENCY_BUCKETS_SECONDS } from '../gateway/metrics.js';

/** An empty registry writing `contentType` (prom-client's types set it with setContentType, not the constructor). */
function registryFor(contentType: RegistryContentType): Registry<PrometheusContentType> | Registry<OpenMetricsContentType> {
  if (contentType === Registry.PROMETHEUS_CONTENT_TYPE) return new Registry();
  const registry = new Registry<OpenMetricsContentType>();
  registry.setContentType(contentType);
  return registry;
}

describe('PlainHistogram', () => {
  for (const contentType of [Registry.PROMETHEUS_CONTENT_TYPE, Registry.OPENMETRICS_CONTENT_TYPE]) {
    it(`writes what prom-client's Histogram writes (${contentType.split(';')[0]})`, async () => {
      const theirs = registryFor(contentType);
      const ours = registryFor(contentType);
      const h = new Histogram({
        name: 'x_seconds',
        help: 'help "text" \\ here',
        buckets: RELAY_LATENCY_BUCKETS_SECONDS,
        registers: [theirs],
      });
      const p = new PlainHistogram('x_seconds', 'help "text" \\ here', RELAY_LATENCY_BUCKETS_SECONDS, [ours]);
      expect(await ours.metrics()).toBe(await theirs.metrics()); // empty
      const values = [
        0,
        0.0005,
        0.0006,
        0.001,
        0.002,
        0.003,
        0.1,
        0.25,
        4.9,
        5,
        5.1,
        1_000,
        ...Array.from({ length: 500 }, (_, i) => (i % 97) / 1000),
      ];
      for (const v of values) {
        h.observe(v);
        p.observe(v);
      }
      expect(await ours.metrics()).toBe(await theirs.metrics());
      h.reset();
      p.reset();
      expect(await ours.metrics()).toBe(await theirs.metrics());
    });
  }
});
