import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AGENT_CAPABILITIES } from '../agent/agent.js';
import { CLIENT_CAPABILITIES } from '../client/gateway-client.js';
import { CAPABILITIES } from '../core/protocol/version.js';
import { GATEWAY_CAPABILITIES } from '../gateway/gateway.js';

/** A capability is offered only if the other side reads it: each is one of CAPABILITIES, which code checks for. */
describe('hello capabilities', () => {
  const known: string[] = Object.values(CAPABILITIES);

  it.each([
    ['gateway', GATEWAY_CAPABILITIES],
    ['agent', AGENT_CAPABILITIES],
    ['client', CLIENT_CAPABILITIES],
  ] as const)('the %s offers only capabilities some code reads', (_who, offered) => {
    expect(offered.filter((c) => !known.includes(c))).toEqual([]);
  });

  it('the web page offers none it would not read', () => {
    const hello = /'hello',\s*\{[^}]*capabilities: \[([^\]]*)\]/.exec(
      readFileSync(new URL('../client/web/src/connection.ts', import.meta.url), 'utf8'),
    );
    expect(hello, 'the web page sends a hello with capabilities').not.toBeNull();
    const named = [...hello![1].matchAll(/CAPABILITIES\.(\w+)/g)].map((m) => (CAPABILITIES as Record<string, string>)[m[1]] ?? m[1]);
    const offered = [...[...hello![1].matchAll(/'([^']+)'/g)].map((m) => m[1]), ...named];
    expect(offered).toContain(CAPABILITIES.joinedReplay); // a late joiner's replay in few messages (issue 28 item 5)
    expect(offered.filter((c) => !known.includes(c))).toEqual([]);
  });
});
