import { afterEach, describe, expect, it } from 'vitest';
import { startRestartable, type RestartableStack } from './support/restartable-stack.js';
import { eventually } from './support/wait.js';

/** Issue 33: who a waiting prompt is for (inbox.list, one gateway, demo engine): the role and the turn's approval decide. */
describe('needs you: what waits for whom', () => {
  let stack: RestartableStack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it("a call that needs the owner's approval waits for the owner only; a question for every controller; a viewer gets neither; the owner's ended session last in, first listed", async () => {
    stack = await startRestartable();
    const alice = await stack.client('ws', 'alice');
    const bob = await stack.client('ws', 'bob');
    const vic = await stack.client('ws', 'vic', ['view']);
    const s = await alice.createSession({ agent: 'builder', options: { turn_approval: 'owner' } });
    // Bob's turn asks for Bash: with turn_approval "owner", only Alice may approve it.
    await (await bob.attach(s.id)).sendUserMessage('run bash: echo hi');
    const aliceSees = await eventually(
      () => alice.inbox(),
      (items) => items.some((i) => i.kind === 'permission'),
      "the Bash prompt in the owner's inbox",
    );
    expect(aliceSees).toEqual([expect.objectContaining({ kind: 'permission', session_id: s.id, tool: 'Bash', owner: 'alice' })]);
    expect(await bob.inbox()).toEqual([]); // a controller, but the call comes from his own turn and needs the owner's approval
    expect(await vic.inbox()).toEqual([]);

    // A question is anyone's to answer who may control: it waits for Bob too (not for Vic).
    const other = await alice.createSession({ agent: 'builder' });
    await other.sendUserMessage('ask me a question');
    const bobSees = await eventually(
      () => bob.inbox(),
      (items) => items.some((i) => i.kind === 'question'),
      "the question in a controller's inbox",
    );
    expect(bobSees).toEqual([expect.objectContaining({ kind: 'question', session_id: other.id, tool: 'AskUserQuestion' })]);
    expect(await vic.inbox()).toEqual([]);

    // Alice stops the first: its prompt is gone, and the end waits for her (newest first).
    await s.stop();
    const after = await eventually(
      () => alice.inbox(),
      (items) => items.some((i) => i.kind === 'ended'),
      'the ended session in the owner inbox',
    );
    expect(after.map((i) => [i.kind, i.session_id])).toEqual([
      ['ended', s.id],
      ['question', other.id],
    ]);
    expect((await bob.inbox()).map((i) => i.kind)).toEqual(['question']); // not Bob's session: its end is not his
  });
});
