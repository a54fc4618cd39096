/**
 * A viewer that stops reading its socket (threats.md B12) must not slow the engine or the
 * other clients: its send queue grows to the limit, it is cut with RESOURCE_EXHAUSTED (close
 * 4008, "slow consumer"), and it resumes from its last seq without losing anything.
 */
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import type { LinkStatus } from '../core/link/link.js';
import { compareViews, record } from './support/recorder.js';
import { startStack, withTimeout, type Stack } from './support/stack.js';
import { waitFor } from './support/wait.js';

const SLOW_CLIENT_BYTES = 256 * 1024;
/** Loopback kernel buffers absorb several MiB before ws's bufferedAmount grows: push well past that. */
const BIG_PROMPTS = 32;
const BIG_PROMPT_CHARS = 512 * 1024;
const FAST_BACKOFF = { initialMs: 50, factor: 1.5, maxMs: 300, jitter: 0.2 };


/** The TCP socket under a connected GatewayClient's WebSocket (test-only reach into privates). */
function socketOf(client: GatewayClient): Socket {
  const link = (client as unknown as { link: { peer?: { channel: { ws?: { _socket?: Socket } } } } }).link;
  const socket = link.peer?.channel.ws?._socket;
  if (!socket) throw new Error('no WebSocket under this client');
  return socket;
}

describe('slow consumer', () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it('a viewer that stops reading is cut at its limit (RESOURCE_EXHAUSTED, 4008) without slowing the engine or a fast viewer, and resumes without loss', async () => {
    stack = await startStack({ engine: 'demo', limits: { slowClientBytes: SLOW_CLIENT_BYTES } });
    const owner = await stack.client();
    const session = await owner.createSession({ agent: 'test-agent', options: { include_partial_messages: true } });
    const ownerRec = record(session);
    const fast = await stack.client();
    const fastRec = record(await fast.attach(session.id, { readOnly: true }));

    const statuses: LinkStatus[] = [];
    const slow = await GatewayClient.connect({ gateway: stack.wsUrl, token: stack.token, backoff: FAST_BACKOFF, onStatus: (s) => statuses.push(s) });
    const slowSession = await slow.attach(session.id, { readOnly: true });
    const slowRec = record(slowSession);
    const slowId = slowSession.clientId;
    await waitFor(() => slowRec.items.length > 0 && slowRec.items.length === fastRec.items.length, 5_000, 'the slow viewer to catch up before it stalls');

    // The slow viewer stops reading its socket.
    const socket = socketOf(slow);
    socket.pause();
    const results = () => fastRec.items.filter((i) => i.body.startsWith('{"type":"result"')).length;

    // A streamed turn (40 deltas 50 ms apart), and behind it 16 MiB of prompt events that every
    // client gets: the stuck viewer's queue passes its limit while the turn streams.
    const started = Date.now();
    await session.sendUserMessage('a slow turn while a viewer is stuck');
    const slowTurn = waitFor(() => results() >= 1, 10_000, 'the streamed turn at the fast viewer').then(() => Date.now() - started);
    const burst = (async () => {
      for (let n = 0; n < BIG_PROMPTS; n++) await session.sendUserMessage(`big ${n} ${'x'.repeat(BIG_PROMPT_CHARS)}`);
    })();
    const gw = stack.gateway.directory.get(session.id)!;
    await waitFor(() => gw.roleOf(slowId) === undefined, 15_000, 'the gateway to cut the slow viewer');
    const stuckAt = slowRec.items.length;

    // It reads again (within the gateway's 5 s close timeout): what was queued, then the close
    // (4008 with its reason), then it reconnects and resumes by itself.
    socket.resume();
    await waitFor(() => statuses.some((s) => s.state === 'down'), 10_000, 'the slow viewer to see the close');
    const down = statuses.find((s) => s.state === 'down') as Extract<LinkStatus, { state: 'down' }>;
    expect(down.error.code).toBe('RESOURCE_EXHAUSTED');
    expect(down.error.message).toMatch(/slow consumer/);
    await waitFor(() => statuses.filter((s) => s.state === 'connected').length >= 2, 10_000, 'the slow viewer to reconnect');

    // Meanwhile the engine and the fast viewer went on at full speed: the turn took its ~2 s.
    const slowTurnMs = await slowTurn;
    expect(slowTurnMs).toBeLessThan(4_000);
    await withTimeout(burst, 20_000, 'the big prompts to be applied');
    await waitFor(() => results() >= BIG_PROMPTS + 1, 20_000, 'the fast viewer to get every turn');
    const allMs = Date.now() - started;
    expect(stuckAt).toBeLessThan(fastRec.items.length);

    await session.stop();
    const ends = await withTimeout(Promise.all([ownerRec.done, fastRec.done, slowRec.done]), 15_000, 'every client to read to the end');
    expect(ends.map((e) => e?.message)).toEqual([undefined, undefined, undefined]);
    const seqs = ownerRec.items.map((i) => i.seq);
    expect(seqs).toEqual(seqs.map((_, n) => n + 1));
    expect(compareViews(ownerRec.items, fastRec.items)).toMatchObject({ lost: 0, duplicated: 0, changed: 0, gaps: 0, outOfOrder: 0 });
    expect(compareViews(ownerRec.items, slowRec.items)).toMatchObject({ lost: 0, duplicated: 0, changed: 0, gaps: 0, outOfOrder: 0 });
    // It resumed from its last seq: nothing it already had came again on the wire.
    expect(slowRec.wire.length).toBe(new Set(slowRec.wire).size);
    console.log(
      `slow-consumer: streamed turn ${slowTurnMs} ms and ${BIG_PROMPTS} × ${BIG_PROMPT_CHARS / 1024} KiB turns at the fast viewer in ${allMs} ms; ` +
        `stuck viewer cut after ${stuckAt} of ${fastRec.items.length} frames, then resumed to ${slowRec.items.length}`,
    );
  }, 60_000);
});
