import { describe, expect, it } from 'vitest';
import { memoryChannelPair, type MemoryChannel } from '../core/channel/memory.js';
import { Dialers } from '../core/link/dial.js';
import { Link } from '../core/link/link.js';
import { PROTOCOL_VERSION } from '../core/protocol/version.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { withTimeout } from './support/wait.js';

/** A gateway end that answers hello once `answer` resolves; resolves when the hello has come. */
function gatewayAt(end: MemoryChannel, answer: Promise<void> = Promise.resolve()): Promise<void> {
  const gateway = new RpcPeer(end);
  let asked!: () => void;
  const helloCame = new Promise<void>((r) => (asked = r));
  gateway.onRequest('hello', async () => {
    asked();
    await answer;
    return { protocol_version: PROTOCOL_VERSION, gateway_id: 'test-gateway', capabilities: [], principal: 'someone' };
  });
  void gateway.run();
  return helloCame;
}

/**
 * Link.close() while the link is still connecting: the dial or the hello in flight cannot be
 * closed by it, so the loop must close what they bring once they finish, and close() must
 * return. A client or agent shut down during a reconnect (a test's teardown after a gateway
 * restart: 30 s hook timeout in a clean-clone run) waited forever for its link's loop.
 */
describe('Link.close() while connecting', () => {
  /** A link whose dial gives `end` once `dialed` resolves, started; close() once `ready` resolves, then `then()`. */
  async function closeWhile(end: MemoryChannel, ready: Promise<void>, dialed: Promise<void>, then: () => void, what: string) {
    const link = new Link({
      url: 'test-gateway://here',
      dialers: new Dialers([['test-gateway:', async () => (await dialed, end)]]),
      hello: () => ({ protocol_version: PROTOCOL_VERSION, role: 'client' as const, client_id: 'c1' }),
    });
    const started = link.start().catch(() => {}); // rejected: closed before it connected
    await withTimeout(ready, 5_000, `the link to be ${what}`);
    const closing = link.close();
    then();
    await withTimeout(closing, 5_000, `close() with a ${what} in flight`);
    await withTimeout(end.closed, 5_000, 'the channel it brought to be closed');
    expect(link.peer).toBeUndefined();
    await started;
  }

  it('during the dial: returns once the dial ends, and closes the channel it brought', async () => {
    const [clientEnd, gatewayEnd] = memoryChannelPair();
    void gatewayAt(gatewayEnd);
    let dialed!: () => void;
    await closeWhile(clientEnd, Promise.resolve(), new Promise<void>((r) => (dialed = r)), () => dialed(), 'dialing');
  });

  it('during the hello: returns once the hello is answered, and closes the channel', async () => {
    const [clientEnd, gatewayEnd] = memoryChannelPair();
    let answer!: () => void;
    const helloCame = gatewayAt(gatewayEnd, new Promise<void>((r) => (answer = r)));
    await closeWhile(clientEnd, helloCame, Promise.resolve(), () => answer(), 'saying hello');
  });
});
