/**
 * Capability replay.joined.v1 (issue 28 item 5, a late joiner's open): an attach's replay
 * comes several session.frames to a WebSocket text message, joined by newlines: the same
 * frames in the same order as one message each, in a few dozen messages instead of thousands.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Channel } from '../core/channel/channel.js';
import { dial } from '../core/link/dial.js';
import { CAPABILITIES, PROTOCOL_VERSION } from '../core/protocol/version.js';
import { JOINED_REPLAY_MAX_BYTES } from '../gateway/directory/client-link.js';
import type { SessionItem } from '../client/remote-session.js';
import { until } from './support/items.js';
import { startStack, withTimeout, type Stack } from './support/stack.js';

const LONG_ENGINE = fileURLToPath(new URL('./support/long-session-engine.mjs', import.meta.url));
const TURNS = 600;

/** Says hello (with `capabilities`), attaches, and returns the text messages that came before the attach answer. */
async function attachMessages(channel: Channel, sessionId: string, capabilities: string[]): Promise<string[]> {
  const messages: string[] = [];
  const answered = (async () => {
    for await (const m of channel) {
      if (typeof m !== 'string') continue;
      if (m.includes('"method":"session.frame"')) messages.push(m);
      else if ((JSON.parse(m) as { id?: unknown }).id === 2) return messages;
    }
    throw new Error('the channel ended before the attach answer');
  })();
  await channel.send(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'hello',
      params: { protocol_version: PROTOCOL_VERSION, role: 'client', capabilities },
    }),
  );
  await channel.send(
    JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'session.attach', params: { session_id: sessionId, read_only: true } }),
  );
  return withTimeout(answered, 20_000, 'the attach answer');
}

describe('replay.joined.v1', () => {
  let stack: Stack;
  let sessionId: string;

  beforeAll(async () => {
    stack = await startStack({ engine: 'claude', engineCommand: LONG_ENGINE, auth: 'off' });
    const session = await (await stack.client()).createSession({ agent: 'test-agent' });
    sessionId = session.id;
    const it_ = session[Symbol.asyncIterator]();
    await session.sendUserMessage(`turns ${TURNS}`);
    let results = 0;
    const lastResult = (i: SessionItem) => i.kind === 'engine' && i.message.type === 'result' && ++results === TURNS;
    await until(it_, lastResult, [], 60_000, 'the last turn');
  }, 90_000);
  afterAll(() => stack?.stop());

  it('a client that lists it gets the same frames, in order, joined into a few messages of at most the cap', async () => {
    const plain = await dial(stack.url);
    const joined = await dial(stack.url);
    try {
      const one = await attachMessages(plain, sessionId, []);
      const many = await attachMessages(joined, sessionId, [CAPABILITIES.joinedReplay]);
      expect(one.length).toBeGreaterThan(2 * TURNS); // an answer, a result and the gateway's events per turn
      expect(one.every((m) => !m.includes('\n'))).toBe(true); // without the capability: one frame a message, as before
      const split = many.flatMap((m) => m.split('\n'));
      // The joined client's own arrival (a presence frame) comes after the replay; the plain client's is in it.
      expect(split.slice(0, one.length)).toEqual(one);
      expect(many.length).toBeLessThan(one.length / 50);
      for (const m of many) if (m.includes('\n')) expect(Buffer.byteLength(m)).toBeLessThanOrEqual(JOINED_REPLAY_MAX_BYTES);
    } finally {
      plain.close();
      joined.close();
    }
  }, 60_000);
});
