import { afterEach, describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { startRestartable, type RestartableStack } from './support/restartable-stack.js';
import { asTetherError, type TetherError } from '../core/errors.js';
import { waitFor } from './support/wait.js';

/** The error `p` rejected with; undefined when it resolved. */
const rejection = (p: Promise<unknown>): Promise<TetherError | undefined> => p.then(() => undefined, asTetherError);

/** Issue 32: the owner hands a session to a teammate (`session.set_owner`): audited, kept in the store. */
describe('session.set_owner', () => {
  let stack: RestartableStack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it('hands the session to a member: roles follow, every member is told, the audit trail has it, and it survives a gateway restart (file store)', async () => {
    stack = await startRestartable();
    const alice = await stack.client('ws', 'alice');
    const bob = await stack.client('ws', 'bob');
    const mine = await alice.createSession({ agent: 'builder' });
    const theirs = await bob.attach(mine.id);
    expect(theirs.role).toBe('controller');

    // Only the owner may hand it over, and only to someone the gateway knows.
    expect((await rejection(theirs.setOwner('bob')))?.code).toBe('PERMISSION_DENIED');
    const stranger = await rejection(mine.setOwner('mallory'));
    expect(stranger?.code).toBe('NOT_FOUND');
    expect(stranger?.message).toContain('mallory is neither a member of session');

    const seen: SessionItem[] = [];
    const reading = (async () => {
      for await (const item of theirs) {
        seen.push(item);
        if (item.kind === 'event' && item.event.subtype === 'owner_changed') return;
      }
    })();
    await mine.setOwner('bob');
    await reading;
    expect(seen.find((i) => i.kind === 'event' && i.event.subtype === 'owner_changed')).toMatchObject({
      event: { owner: 'bob', previous_owner: 'alice' },
    });
    await waitFor(
      async () => (await bob.getSession(mine.id)).clients.some((c) => c.principal === 'bob' && c.role === 'owner'),
      5_000,
      'bob to be owner',
    );
    const now = await bob.getSession(mine.id);
    expect(now.owner).toBe('bob');
    expect(now.clients.find((c) => c.principal === 'alice')?.role).toBe('controller');
    const audit = await (await bob.peer()).request('session.audit', { session_id: mine.id, action: 'owner_change' });
    expect(audit.entries).toMatchObject([{ principal: 'alice', action: 'owner_change', previous_owner: 'alice', owner: 'bob' }]);

    await stack.restart();
    const bobAgain = await stack.client('ws', 'bob');
    const aliceAgain = await stack.client('ws', 'alice');
    expect((await bobAgain.listSessions()).find((s) => s.id === mine.id)?.owner).toBe('bob');
    expect((await bobAgain.attach(mine.id)).role).toBe('owner');
    const aliceSession = await aliceAgain.attach(mine.id);
    expect(aliceSession.role).toBe('controller');
    expect((await rejection(aliceSession.setOwner('alice')))?.code).toBe('PERMISSION_DENIED');
  }, 60_000);
});
