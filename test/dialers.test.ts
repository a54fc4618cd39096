/**
 * The dialer registry is a value (core/link/dial.ts): a program adds a scheme to its own
 * registry and no other registry sees it, so no module-wide state decides what a link dials.
 */
import { describe, expect, it } from 'vitest';
import { memoryChannelPair } from '../core/channel/memory.js';
import { Dialers, standardDialers } from '../core/link/dial.js';

describe('Dialers', () => {
  it('with() returns a new registry: the extra scheme dials there and nowhere else', async () => {
    const base = standardDialers();
    const [mine] = memoryChannelPair();
    const extended = base.with('test-loop:', async () => mine);
    await expect(extended.dial('test-loop://x')).resolves.toBe(mine);
    expect(() => base.parse('test-loop://x')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => standardDialers().parse('test-loop://x')).toThrow(
      /unsupported gateway URL scheme "test-loop:".*supported: ws:, wss:, grpc:, grpcs:/,
    );
  });

  it('a registry dials only its own schemes, refusing others with INVALID_ARGUMENT', async () => {
    const only = new Dialers([['test-loop:', async () => memoryChannelPair()[0]]]);
    await expect(only.dial('ws://127.0.0.1:1')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('supported: test-loop:'),
    });
    await expect(only.dial('not a url')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
