/**
 * EndOfTurn: what the channels of one listener share to write a turn's frames together. Each
 * listed item ends its turn once, at the turn's end, with one tick for all; an item listed
 * while they run waits for the next turn; two EndOfTurns know nothing of each other. The
 * real listeners hand one to every channel they accept (and the gRPC one its FrameEncoder);
 * each dialed channel has its own.
 */
import { createServer } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Channel } from '../core/channel/channel.js';
import { EndOfTurn, type TurnEnd } from '../core/channel/end-of-turn.js';
import { dial } from '../core/link/dial.js';
import { FrameEncoder } from '../core/wire/grpc-frame.js';
import { startGrpcListener } from '../gateway/listen/listen-grpc.js';
import { attachWsListener } from '../gateway/listen/listen-ws.js';
import { cleanupsPerTest, type Cleanups } from './support/cleanups.js';
import { receiveFrames } from './support/channel-read.js';

/** An item that records, into `log`, each time its turn ends. */
function item(name: string, log: string[], then?: () => void): TurnEnd {
  return {
    endTurn: () => {
      log.push(name);
      then?.();
    },
  };
}

/**
 * The process.nextTick calls `turns` made, of those `spy` saw: the shared project's worker
 * runs other files' leftovers too (a socket's close, a stream's end), which tick on their own.
 */
const ticksOf = (spy: { mock: { calls: unknown[][] } }, ...turns: EndOfTurn[]) =>
  spy.mock.calls.filter(([callback]) => turns.some((t) => callback === (t as unknown as { run: unknown }).run)).length;

/** Resolves after every process.nextTick queued so far has run (setImmediate runs after them). */
const afterTicks = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('EndOfTurn', () => {
  afterEach(() => vi.restoreAllMocks());

  it('ends the turn of every item listed in it, in order, after the turn and with one tick for all', async () => {
    const log: string[] = [];
    const turn = new EndOfTurn();
    const ticks = vi.spyOn(process, 'nextTick');
    for (const name of ['a', 'b', 'c']) turn.add(item(name, log));
    expect(log).toEqual([]); // not during the turn
    expect(ticksOf(ticks, turn)).toBe(1);
    await afterTicks();
    expect(log).toEqual(['a', 'b', 'c']);
  });

  it('an item listed while the turn ends waits for the end of the next turn', async () => {
    const log: string[] = [];
    const turn = new EndOfTurn();
    const late = item('late', log);
    turn.add(item('first', log, () => turn.add(late)));
    await afterTicks();
    expect(log).toEqual(['first', 'late']); // the late one ran on a tick of its own, once
    await afterTicks();
    expect(log).toEqual(['first', 'late']);
  });

  it('two EndOfTurns (two listeners) keep their own lists: each ends only its own items, each with its own tick', async () => {
    const log: string[] = [];
    const [one, two] = [new EndOfTurn(), new EndOfTurn()];
    const ticks = vi.spyOn(process, 'nextTick');
    one.add(item('one', log));
    two.add(item('two', log));
    expect(ticksOf(ticks, one)).toBe(1);
    expect(ticksOf(ticks, two)).toBe(1);
    await afterTicks();
    expect(log.sort()).toEqual(['one', 'two']);
  });
});

/** One listener of `transport` on 127.0.0.1:0 with two clients dialed to it: the two accepted channels and the two dialed ones. */
async function twoClients(transport: 'ws' | 'grpc', cleanups: Cleanups): Promise<{ accepted: Channel[]; dialed: Channel[] }> {
  const accepted: Channel[] = [];
  const onChannel = (channel: Channel) => void accepted.push(channel);
  let port: number;
  if (transport === 'ws') {
    const http = createServer();
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const detach = attachWsListener(http, { onChannel });
    cleanups.push(
      () => new Promise<void>((resolve) => http.close(() => resolve())),
      () => http.closeAllConnections(),
      detach,
    );
    port = (http.address() as { port: number }).port;
  } else {
    const listener = await startGrpcListener({ host: '127.0.0.1', port: 0, onChannel });
    cleanups.push(() => listener.close({ graceMs: 1_000 }));
    port = listener.port;
  }
  const dialed: Channel[] = [];
  for (let i = 0; i < 2; i++) {
    const channel = await dial(`${transport}://127.0.0.1:${port}`, { connectTimeoutMs: 5_000, token: 'test-token' });
    cleanups.push(() => channel.close());
    dialed.push(channel);
  }
  for (let waited = 0; accepted.length < 2 && waited < 5_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(accepted).toHaveLength(2);
  cleanups.push(() => accepted.forEach((channel) => channel.close()));
  return { accepted, dialed };
}

describe('the channels one listener accepts share its EndOfTurn; dialed channels have their own', () => {
  const cleanups = cleanupsPerTest();
  afterEach(() => vi.restoreAllMocks());

  for (const transport of ['ws', 'grpc'] as const) {
    it(`${transport}: a frame posted to two clients in one turn lists both channels in one EndOfTurn${transport === 'grpc' ? ', and is encoded once' : ''}`, async () => {
      const { accepted, dialed } = await twoClients(transport, cleanups);
      const listed = vi.spyOn(EndOfTurn.prototype, 'add');
      const encoded = vi.spyOn(FrameEncoder.prototype, 'encode');
      const frame = Buffer.from('{"jsonrpc":"2.0","method":"n","params":{}}');
      for (const channel of accepted) expect(channel.post(frame)).toBe(true);
      expect(listed).toHaveBeenCalledTimes(2);
      accepted.forEach((channel, i) => expect(listed.mock.calls[i][0]).toBe(channel));
      expect(listed.mock.contexts[0]).toBe(listed.mock.contexts[1]); // one EndOfTurn: one tick for both
      if (transport === 'grpc') {
        expect(encoded.mock.contexts[0]).toBe(encoded.mock.contexts[1]);
        expect(encoded.mock.results[1].value).toBe(encoded.mock.results[0].value); // the second client got the first's encoding
      }
      for (const channel of dialed) expect(await receiveFrames(channel, 1)).toEqual([frame.toString()]);
      listed.mockClear();
      for (const channel of dialed) expect(channel.post(frame)).toBe(true);
      expect(listed).toHaveBeenCalledTimes(2);
      expect(listed.mock.contexts[0]).not.toBe(listed.mock.contexts[1]); // two links, two of their own
      for (const channel of accepted) expect(await receiveFrames(channel, 1)).toEqual([frame.toString()]);
    });
  }
});
