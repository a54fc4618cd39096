import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { isResult, until } from './support/items.js';
import { startStack } from './support/stack.js';
import { cleanupsPerTest } from './support/cleanups.js';

const ENGINE = fileURLToPath(new URL('./support/big-line-engine.mjs', import.meta.url));

/** threats.md part 3 / issue 6: a 16 MiB engine line works by default, on both transports. */
describe.each(['ws', 'grpc'] as const)('a 16 MiB engine line over %s', (transport) => {
  const cleanups = cleanupsPerTest();

  it('reaches the client intact, worst-case escaping included, with default limits', async () => {
    const stack = cleanups.own(
      await startStack({ engine: 'claude', engineCommand: ENGINE, clientTransport: transport, agentTransport: transport }),
    );
    const session = await (await stack.client()).createSession({ agent: 'test-agent' });
    const items: SessionItem[] = [];
    await session.sendUserMessage('go big');
    await until(session[Symbol.asyncIterator](), isResult, items, 60_000, 'the result after the big line');
    const big = items.find((i) => i.kind === 'engine' && i.message.type === 'assistant') as { line: string; message: any };
    expect(Buffer.byteLength(big.line)).toBeGreaterThan(16 * 1024 * 1024 - 64);
    expect(Buffer.byteLength(big.line)).toBeLessThanOrEqual(16 * 1024 * 1024);
    const text: string = big.message.message.content[0].text;
    expect(text.length).toBeGreaterThan(8 * 1024 * 1024 - 64);
    expect(/^"+$/.test(text)).toBe(true);
  }, 90_000);
});
