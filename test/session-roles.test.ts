/**
 * Issue 13, finding 2: roles are the gateway's decision. A client's role comes from its
 * token's scope, the session's owner and the owner's decisions (kept with the session),
 * never from the token's `sub` alone; stop and set_role check role and scope.
 */
import { describe, expect, it, vi } from 'vitest';
import { processesIn } from './support/cli.js';
import { codeOf } from './support/items.js';
import { startRestartable } from './support/restartable-stack.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { waitFor } from './support/wait.js';

describe.each(['ws', 'grpc'] as const)('roles over %s', (t) => {
  const cleanups = cleanupsPerTest();

  it('a demoted controller stays a viewer when it detaches and attaches again, reconnects, and after a gateway restart', async () => {
    const stack = cleanups.own(await startRestartable());
    const alice = await stack.client(t, 'alice');
    const owned = await alice.createSession({ agent: 'builder' });
    expect(owned.role).toBe('owner');
    const bob = await stack.client(t, 'bob');
    const first = await bob.attach(owned.id);
    expect(first.role).toBe('controller');

    await owned.setRole(first.clientId, 'viewer');
    expect(await codeOf(first.sendUserMessage('still mine?'))).toBe('PERMISSION_DENIED');
    await bob.detach(first);
    const again = await bob.attach(owned.id);
    expect(again.role).toBe('viewer');
    expect(await codeOf(again.sendUserMessage('after re-attach'))).toBe('PERMISSION_DENIED');
    expect(await codeOf(again.stop())).toBe('PERMISSION_DENIED');

    const reconnected = await (await stack.client(t, 'bob')).attach(owned.id);
    expect(reconnected.role).toBe('viewer');

    await stack.restart();
    const afterRestart = await (await stack.client(t, 'bob')).attach(owned.id);
    expect(afterRestart.role).toBe('viewer');
    expect(await codeOf(afterRestart.sendUserMessage('after the restart'))).toBe('PERMISSION_DENIED');
    expect(await codeOf(afterRestart.stop())).toBe('PERMISSION_DENIED');
    const info = stack.gateway.directory.get(owned.id)!.info();
    expect(info.state).not.toBe('ended');

    // The owner's promotion sticks the same way.
    const ownerAgain = await (await stack.client(t, 'alice')).attach(owned.id);
    expect(ownerAgain.role).toBe('owner');
    await ownerAgain.setRole(afterRestart.clientId, 'controller');
    const promoted = await (await stack.client(t, 'bob')).attach(owned.id);
    expect(promoted.role).toBe('controller');
    expect(await promoted.sendUserMessage('promoted')).toBe('applied');
    const audit = await ownerAgain.audit(); // a file: the whole trail, across the restart
    expect(audit.filter((e) => e.action === 'role_change').map((e) => [e.principal, e.target_principal, e.role])).toEqual([
      ['alice', 'bob', 'viewer'],
      ['alice', 'bob', 'controller'],
    ]);
  }, 60_000);

  it("a view-scoped token with the owner's sub attaches as a viewer and can neither stop, set roles nor send; the engine keeps running", async () => {
    const stack = cleanups.own(await startRestartable());
    const alice = await stack.client(t, 'alice');
    const owned = await alice.createSession({ agent: 'builder' });
    const bob = await (await stack.client(t, 'bob')).attach(owned.id);
    const [enginePid] = processesIn(stack.cwd, 'demo-engine/main.js');
    expect(enginePid).toBeGreaterThan(0);

    const lookalike = await (await stack.client(t, 'alice', ['view'])).attach(owned.id);
    expect(lookalike.role).toBe('viewer');
    expect(await codeOf(lookalike.stop())).toBe('PERMISSION_DENIED');
    expect(await codeOf(lookalike.setRole(bob.clientId, 'viewer'))).toBe('PERMISSION_DENIED');
    expect(await codeOf(lookalike.sendUserMessage('let me in'))).toBe('PERMISSION_DENIED');
    expect(await codeOf(lookalike.send({ type: 'control_request', request_id: 'i', request: { subtype: 'interrupt' } }))).toBe(
      'PERMISSION_DENIED',
    );

    // The owner's sub with a token scoped to other agents does not even see the session.
    const elsewhere = await stack.client(t, 'alice', ['control', 'agent:elsewhere']);
    expect(await codeOf(elsewhere.attach(owned.id))).toBe('NOT_FOUND');
    expect(await elsewhere.listSessions()).toEqual([]);

    // A create-only token of the owner is not an owner either.
    const creator = await (await stack.client(t, 'alice', ['create'])).attach(owned.id);
    expect(creator.role).toBe('viewer');
    expect(await codeOf(creator.stop())).toBe('PERMISSION_DENIED');

    const session = stack.gateway.directory.get(owned.id)!;
    expect(session.info().clients.find((c) => c.client_id === bob.clientId)?.role).toBe('controller');
    expect(session.ended).toBe(false);
    expect(processesIn(stack.cwd, 'demo-engine/main.js')).toEqual([enginePid]);
    expect((await owned.audit()).some((e) => e.action === 'stop' || e.action === 'role_change')).toBe(false);
  }, 60_000);

  it('session.stop by a viewer is PERMISSION_DENIED and the engine keeps running; the owner may stop', async () => {
    const stack = cleanups.own(await startRestartable());
    const owned = await (await stack.client(t, 'alice')).createSession({ agent: 'builder' });
    const reader = await (await stack.client(t, 'carol')).attach(owned.id, { readOnly: true });
    expect(reader.role).toBe('viewer');
    const [enginePid] = processesIn(stack.cwd, 'demo-engine/main.js');
    expect(await codeOf(reader.stop())).toBe('PERMISSION_DENIED');
    expect(processesIn(stack.cwd, 'demo-engine/main.js')).toEqual([enginePid]);
    expect(stack.gateway.directory.get(owned.id)!.ended).toBe(false);
    // Stops asked for at once share one stop toward the agent (a flood of them costs the agent nothing).
    const toAgent = vi.spyOn(stack.gateway.directory.agent('builder')!, 'stop');
    await Promise.all(Array.from({ length: 50 }, () => owned.stop()));
    expect(toAgent).toHaveBeenCalledTimes(1);
    await waitFor(() => stack.gateway.directory.get(owned.id)!.ended, 10_000, 'the stopped session to end');
  }, 60_000);
});
