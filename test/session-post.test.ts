/**
 * Prompts as `session.post` (capability session.post.v1): answered by their own echo, applied
 * at most once per input id, refusals typed, and the notification takes prompts only.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NotificationParams } from '../core/protocol/methods.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { codeOf, until } from './support/items.js';
import { startStack, withTimeout, type Stack } from './support/stack.js';

const ECHO_ENGINE = fileURLToPath(new URL('../bench/echo-engine.mjs', import.meta.url));
const prompt = (text: string) => ({ type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '' });
const isAnswer = (text: string) => (i: SessionItem) =>
  i.kind === 'engine' && i.message.type === 'assistant' && i.line.includes(`"text":"${text}"`);

describe('session.post', () => {
  let stack: Stack;
  let session: RemoteSession;
  let items: SessionItem[];
  let it_: AsyncIterator<SessionItem>;

  beforeAll(async () => {
    stack = await startStack({ engine: 'claude', engineCommand: ECHO_ENGINE, auth: 'off' });
    session = await (await stack.client()).createSession({ agent: 'test-agent' });
    items = [];
    it_ = session[Symbol.asyncIterator]();
  }, 60_000);
  afterAll(() => stack?.stop());

  it('a prompt posted twice under one input id runs once: the echo answers the first, the second is a duplicate', async () => {
    expect(await session.send(prompt('only once'), 'post-1')).toBe('applied');
    expect(await session.send(prompt('only once'), 'post-1')).toBe('duplicate');
    expect(await session.send(prompt('after'), 'post-2')).toBe('applied');
    await until(it_, isAnswer('after'), items, 20_000, 'the answer to the later prompt');
    expect(items.filter(isAnswer('only once'))).toHaveLength(1);
    const echoes = items.filter((i) => i.kind === 'event' && i.event.subtype === 'prompt');
    expect(echoes.map((i) => i.kind === 'event' && i.event.subtype === 'prompt' && i.event.input_id)).toEqual(['post-1', 'post-2']);
  }, 60_000);

  it('refusals come back typed, and leave nothing in the session', async () => {
    const viewer = await (await stack.client()).attach(session.id, { readOnly: true });
    const lister = await stack.client();
    const lastSeq = async () => (await lister.listSessions()).find((x) => x.id === session.id)?.last_seq;
    const before = await lastSeq();
    expect(await codeOf(viewer.sendUserMessage('not mine to send'))).toBe('PERMISSION_DENIED');
    expect(await codeOf(session.send({ type: 'user', message: { role: 'user' } }))).toBe('INVALID_ARGUMENT');
    expect(await lastSeq()).toBe(before); // no echo, no state change
  }, 30_000);

  it('the notification carries prompts only: another line type is refused by a session.post_result', async () => {
    const peer = await (await stack.client()).peer();
    await peer.request('session.attach', { session_id: session.id });
    const result = new Promise<NotificationParams<'session.post_result'>>((resolve) => peer.onNotification('session.post_result', resolve));
    await peer.notify('session.post', {
      session_id: session.id,
      input_id: 'not-a-prompt',
      line: { type: 'control_request', request_id: 'r1', request: { subtype: 'interrupt' } },
    });
    const r = await withTimeout(result, 10_000, 'the session.post_result');
    expect(r.input_id).toBe('not-a-prompt');
    expect((r.error?.data as { code?: string } | undefined)?.code).toBe('INVALID_ARGUMENT');
  }, 30_000);
});
