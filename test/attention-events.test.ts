import { describe, expect, it, vi } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { silentLogger } from '../core/logging.js';
import { AttentionDesk } from '../gateway/attention/attention-desk.js';
import type { Attention } from '../gateway/attention/attention-events.js';
import { deriveAttention } from '../gateway/attention/attention-events.js';
import { Notifier } from '../gateway/attention/notifier.js';
import { MemoryPrefsStore } from '../gateway/attention/notify-prefs.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startRig } from './support/engines.js';
import { until } from './support/items.js';
import { waitFor } from './support/wait.js';

const isResult = (i: SessionItem) => i.kind === 'engine' && i.origin === 'engine' && i.message.type === 'result';
const isCanUseTool = (i: SessionItem) =>
  i.kind === 'engine' && i.message.type === 'control_request' && (i.message.request as { subtype?: string })?.subtype === 'can_use_tool';

/** A demo rig with the attention room on it; `seen` collects every event the notifier is handed. */
async function attentionRig(cleanups: ReturnType<typeof cleanupsPerTest>) {
  const rig = cleanups.own(await startRig('demo'));
  const notifier = new Notifier({ webhooks: [], prefs: new MemoryPrefsStore(), logger: silentLogger });
  const desk = new AttentionDesk(rig.stack.gateway.directory, notifier, { allowHttpLoopback: false });
  const seen: Attention[] = [];
  vi.spyOn(notifier, 'handle').mockImplementation((a) => void seen.push(a));
  return { rig, desk, seen };
}

describe('attention events (gateway/attention/)', () => {
  const cleanups = cleanupsPerTest();

  it('a permission prompt, then the finished turn: typed, with session, agent, tool and who may answer', async () => {
    const { rig, seen } = await attentionRig(cleanups);
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('create a file');
    const ask = (await until(items, isCanUseTool)) as unknown as { message: { request_id: string } };
    const prompt = seen.find((a) => a.event.type === 'permission_request');
    expect(prompt?.event).toMatchObject({
      session_id: session.id,
      agent: 'test-agent',
      tool: 'Bash',
      request_id: ask.message.request_id,
      may_answer: { principals: ['test-user'], roles: ['owner', 'controller'] },
    });
    // The owner has the session open: told, but marked present (nothing is sent to them).
    expect(prompt?.recipients).toEqual([{ principal: 'test-user', mayAnswer: true, present: true }]);
    await session.answer(ask.message.request_id, { behavior: 'allow', updatedInput: {} as Record<string, unknown> });
    await until(items, isResult);
    await waitFor(() => seen.some((a) => a.event.type === 'turn_complete'), 5_000, 'turn_complete');
    expect(seen.map((a) => a.event.type)).toEqual(['permission_request', 'turn_complete']);
    expect(seen[1].recipients).toEqual([{ principal: 'test-user', mayAnswer: false, present: true }]);
  });

  it('a person whose page reports its tab hidden is told as if away; in sight again, present', async () => {
    const { rig, desk, seen } = await attentionRig(cleanups);
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const testUser = { sub: 'test-user', kind: 'client', canCreate: true, canControl: true, canAdmin: false } as const;
    const notices = rig.stack.gateway.directory.notices!;
    desk.visibility(testUser, session.id, false);
    notices(session.id, { kind: 'prompt', requestId: 'r-hidden', tool: 'Bash', interactive: false });
    desk.visibility(testUser, session.id, true);
    notices(session.id, { kind: 'prompt', requestId: 'r-seen', tool: 'Bash', interactive: false });
    expect(seen.map((a) => a.recipients[0].present)).toEqual([false, true]);
    expect(() => desk.visibility({ ...testUser, agents: ['elsewhere'] }, session.id, false)).toThrow(/no session/);
  });

  it('the same prompt derived again has the same id; another prompt another', async () => {
    const { rig } = await attentionRig(cleanups);
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const s = rig.stack.gateway.directory.get(session.id)!;
    const n = { kind: 'prompt', requestId: 'r-1', tool: 'Bash', interactive: false } as const;
    const a = deriveAttention(s, n)!.event.id;
    expect(deriveAttention(s, n)!.event.id).toBe(a);
    expect(deriveAttention(s, { ...n, requestId: 'r-2' })!.event.id).not.toBe(a);
  });

  it('AskUserQuestion is a question; a call a standing rule answers is no event at all', async () => {
    const { rig, seen } = await attentionRig(cleanups);
    const session = await (await rig.stack.client()).createSession({
      agent: 'test-agent',
      canUseTool: (req) =>
        req.toolName === 'AskUserQuestion'
          ? { behavior: 'deny', message: 'not now' }
          : { behavior: 'allow', updatedInput: req.input, rememberForSession: true },
    });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('create a file');
    await until(items, isResult);
    await session.sendUserMessage('create a file again'); // the rule granted above answers this one
    await until(items, isResult);
    await session.sendUserMessage('ask me a question');
    await until(items, isResult);
    await waitFor(() => seen.filter((a) => a.event.type === 'turn_complete').length === 3, 5_000, 'three turns');
    expect(seen.map((a) => a.event.type)).toEqual(['permission_request', 'turn_complete', 'turn_complete', 'question', 'turn_complete']);
    expect(seen[3].event.tool).toBe('AskUserQuestion');
  });

  it('the agent lost, then the session ended: each told to the owner once', async () => {
    const { rig, seen } = await attentionRig(cleanups);
    const client = await rig.stack.client();
    const session = await client.createSession({ agent: 'test-agent' });
    await client.detach(session);
    const dir = rig.stack.gateway.directory;
    dir.agentDown(dir.agent('test-agent')!); // what a dropped agent link does
    dir.get(session.id)!.bindHost(undefined); // told once, however often the loss is seen
    dir.get(session.id)!.end();
    expect(seen.map((a) => a.event.type)).toEqual(['agent_lost', 'session_ended']);
    expect(seen.every((a) => a.recipients.length === 1 && a.recipients[0].principal === 'test-user' && !a.recipients[0].present)).toBe(
      true,
    );
  });

  it("session.follow: a follower is among the recipients of the turn's end, and not after unfollowing; refused for a session the token cannot see, a follow that is not a boolean, a gateway without notifications", async () => {
    const { rig, seen } = await attentionRig(cleanups);
    const owner = await rig.stack.client();
    const session = await owner.createSession({ agent: 'test-agent' });
    const bob = await rig.stack.client({ sub: 'bob' });
    const peer = await bob.peer();
    await peer.request('session.follow', { session_id: session.id, follow: true });
    const notices = rig.stack.gateway.directory.notices!;
    notices(session.id, { kind: 'turn_complete', seq: 1 });
    expect(seen.at(-1)?.recipients).toEqual([
      { principal: 'test-user', mayAnswer: false, present: true },
      { principal: 'bob', mayAnswer: false, present: false },
    ]);
    await peer.request('session.follow', { session_id: session.id, follow: false });
    notices(session.id, { kind: 'turn_complete', seq: 2 });
    expect(seen.at(-1)?.recipients.map((r) => r.principal)).toEqual(['test-user']);

    const elsewhere = await (await rig.stack.client({ sub: 'eve', scopes: ['agent:elsewhere'] })).peer();
    await expect(elsewhere.request('session.follow', { session_id: session.id, follow: true })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    await expect(peer.request('session.follow', { session_id: session.id, follow: 'yes' } as never)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    const plain = cleanups.own(await startRig('demo'));
    const s2 = await (await plain.stack.client()).createSession({ agent: 'test-agent' });
    await expect(
      (await plain.stack.client()).peer().then((p) => p.request('session.follow', { session_id: s2.id, follow: true })),
    ).rejects.toMatchObject({ code: 'FAILED_PRECONDITION', message: expect.stringContaining('notifications are off') });
  });
});
