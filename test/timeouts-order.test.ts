import { describe, expect, it } from 'vitest';
import { AGENT_CONFIG } from '../agent/config.js';
import { keysOf } from '../core/config/keys.js';
import { AGENT_WAIT_MS, CLUSTER_CREATE_WAIT_ORDER, CREATE_WAIT_ORDER, ENGINE_START_TIMEOUT_MS } from '../core/timeouts.js';
import { GATEWAY_CONFIG } from '../gateway/config.js';

/** Each wait of a create outlasts the ones it contains, so the innermost that gives up is the one that reports. */
describe("the order of a create's waits (core/timeouts.ts)", () => {
  it.each([
    ['a create', CREATE_WAIT_ORDER],
    ['a create forwarded in a cluster', CLUSTER_CREATE_WAIT_ORDER],
  ] as const)('%s: every outer wait is longer than the one it contains', (_what, order) => {
    for (let i = 1; i < order.length; i++) {
      const [inner, innerMs] = order[i - 1];
      const [outer, outerMs] = order[i];
      expect(outerMs, `${outer} (${outerMs} ms) must outlast ${inner} (${innerMs} ms)`).toBeGreaterThan(innerMs);
    }
  });

  it('the configurable ones default to the ordered values', () => {
    const agentKey = keysOf(AGENT_CONFIG.schema).find((k) => k.name === 'initializeTimeoutMs');
    expect(agentKey?.defaultValue).toBe(ENGINE_START_TIMEOUT_MS);
    const gatewayKey = keysOf(GATEWAY_CONFIG.schema).find((k) => k.name === 'limits.agentWaitMs');
    expect(gatewayKey?.defaultValue).toBe(AGENT_WAIT_MS);
  });
});
