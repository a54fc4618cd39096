/**
 * PromptPosts (client/prompt-posts.ts), the prompts a client sends as session.post: one timer
 * serves every post, yet each post still fails with DEADLINE_EXCEEDED at its own deadline and
 * not before; an echo or a result settles it; a post that cannot go fails at once with the
 * channel's own reason.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { memoryChannelPair } from '../core/channel/memory.js';
import type { TetherError } from '../core/errors.js';
import { tetherEvent } from '../core/protocol/events.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { POST_ANSWER_MS, PromptPosts } from '../client/prompt-posts.js';

const line = { type: 'user', message: { role: 'user', content: 'hi' } };
const echo = (inputId: string) =>
  tetherEvent({ subtype: 'prompt', principal: 'p', client_id: 'c', message: line.message, input_id: inputId });
const outcome = (p: Promise<unknown>) =>
  p.then(
    (v) => v,
    (e: TetherError) => e.code,
  );

describe('PromptPosts', () => {
  afterEach(() => vi.useRealTimers());

  it('fails each unanswered post at its own deadline, with one timer for all of them', async () => {
    vi.useFakeTimers();
    const [a] = memoryChannelPair();
    const peer = new RpcPeer(a);
    const posts = new PromptPosts();
    const first = outcome(posts.post(peer, 's', 'in-1', line));
    await vi.advanceTimersByTimeAsync(10_000);
    const second = outcome(posts.post(peer, 's', 'in-2', line));
    const third = outcome(posts.post(peer, 's', 'in-3', line));
    expect(vi.getTimerCount()).toBe(1);
    posts.onEvent(echo('in-3'), 'p');
    expect(await third).toBe('applied');
    await vi.advanceTimersByTimeAsync(POST_ANSWER_MS - 10_001);
    let settled: unknown;
    void first.then((v) => (settled = v));
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBeUndefined(); // 1 ms before its deadline
    await vi.advanceTimersByTimeAsync(1);
    expect(await first).toBe('DEADLINE_EXCEEDED');
    let secondSettled: unknown;
    void second.then((v) => (secondSettled = v));
    await vi.advanceTimersByTimeAsync(9_998);
    expect(secondSettled).toBeUndefined();
    await vi.advanceTimersByTimeAsync(2);
    expect(await second).toBe('DEADLINE_EXCEEDED');
    await vi.advanceTimersByTimeAsync(POST_ANSWER_MS);
    expect(vi.getTimerCount()).toBe(0); // nothing waits: the timer ran out and was not set again
  });

  it('is settled by its echo or its result, and fails at once when it cannot be sent', async () => {
    const [a, b] = memoryChannelPair({ maxFrameBytes: 1_000 });
    const peer = new RpcPeer(a);
    const posts = new PromptPosts();
    const applied = outcome(posts.post(peer, 's', 'in-1', line));
    const duplicate = outcome(posts.post(peer, 's', 'in-2', line));
    posts.onEvent(echo('in-1'), 'someone else'); // another principal's input id: not ours
    posts.onEvent(echo('in-1'), 'p');
    posts.onResult({ session_id: 's', input_id: 'in-2', status: 'duplicate' });
    expect([await applied, await duplicate]).toEqual(['applied', 'duplicate']);
    expect(await outcome(posts.post(peer, 's', 'big', { type: 'user', message: { role: 'user', content: 'x'.repeat(2_000) } }))).toBe(
      'RESOURCE_EXHAUSTED',
    );
    b.close();
    await a.closed;
    expect(await outcome(posts.post(peer, 's', 'late', line))).toBe('FAILED_PRECONDITION');
  });
});
