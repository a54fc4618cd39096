import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import { startClusterStack, type ClusterStack } from './support/cluster-stack.js';
import {
  BURST_ENGINE,
  BASH_TURN,
  LONG_TURN,
  TEARDOWN_MS,
  seqsOf,
  longTurnUnderWay,
  expectWholeTurn,
  listedWhen,
  dumpLogsOnFailure,
} from './support/cluster-turns.js';
import { codeOf, isCanUseTool, isResult, until } from './support/items.js';
import { processesIn } from './support/cli.js';
import { toolResults } from './support/turns.js';
import { hasTool } from './support/tools.js';

/** Several gateways on one NATS server: the session, its clients and its agent outlive the SIGKILL of the gateway holding it (the rest: cluster.test.ts). */
describe.skipIf(!hasTool('nats-server'))('a cluster of three gateways: the gateway holding a session is SIGKILLed', () => {
  let stack: ClusterStack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  }, TEARDOWN_MS); // each step of the stack's stop is bounded; together they may outlast the default hook timeout

  it('the first gateway is SIGKILLed mid-stream: the agent moves, the engine is not restarted, both clients resume with no frame lost or doubled', async () => {
    stack = await startClusterStack({ gateways: 3, scenario: LONG_TURN });
    dumpLogsOnFailure(stack);
    const {
      bob,
      s1,
      iters: [i1, i2],
      seen,
    } = await longTurnUnderWay(stack, 1, 2);
    const arrivals: number[][] = [[], []];
    const watch = (n: number) => (_item: SessionItem) => (arrivals[n].push(Date.now()), false);
    const enginePids = processesIn(stack.cwd, 'claude');
    expect(enginePids).toHaveLength(1);

    const killedAt = Date.now();
    expect((await stack.gateways[0].daemon.stop('SIGKILL')).signal).toBe('SIGKILL');
    await Promise.all(
      [i1, i2].map((it, n) => until(it, (i) => (watch(n)(i), isResult(i)), seen[n], 60_000, 'the turn to finish after the kill')),
    );
    const resumedMs = seen.map((_list, n) => arrivals[n][0] - killedAt);

    expectWholeTurn(seen);
    expect(processesIn(stack.cwd, 'claude')).toEqual(enginePids); // the same engine all along
    const listed = (await bob.listSessions()).find((x) => x.id === s1.id);
    expect([stack.gateways[1].id, stack.gateways[2].id]).toContain(listed?.gateway);
    process.stdout.write(`fail-over: clients resumed ${resumedMs.join(' ms and ')} ms after the SIGKILL; frames lost 0, doubled 0\n`);
  }, 120_000);

  it("a pending permission prompt and the owner's role decisions survive the SIGKILL of the gateway holding the session; the tool runs once", async () => {
    stack = await startClusterStack({ gateways: 3, scenario: BASH_TURN });
    dumpLogsOnFailure(stack);
    const alice = await stack.client(1, 'alice');
    const bob = await stack.client(2, 'bob');
    const s1 = await alice.createSession({ agent: 'builder' });
    const s2 = await bob.attach(s1.id);
    await s1.setRole(s2.clientId, 'viewer'); // decided on the first gateway, kept in the registry
    const [i1, i2] = [s1, s2].map((s) => s[Symbol.asyncIterator]());
    const seen: SessionItem[][] = [[], []];
    await s1.sendUserMessage('append a line');
    const prompts = await Promise.all([i1, i2].map((it, n) => until(it, isCanUseTool, seen[n], 30_000, 'the permission prompt')));
    const ask = asPermissionRequest((prompts[0] as { message: Record<string, unknown> }).message)!;
    const enginePids = processesIn(stack.cwd, 'claude');

    expect((await stack.gateways[0].daemon.stop('SIGKILL')).signal).toBe('SIGKILL');
    // Both resume on their gateways; the session is held by the second now, its prompt still pending.
    const info = await listedWhen(
      bob,
      s1.id,
      (i) => i.gateway !== stack!.gateways[0].id && i.state === 'requires_action' && i.clients.length === 2,
      'the session to come back with its prompt',
    );
    expect(info.pending_prompts).toBe(1);
    expect(info.clients.find((c) => c.principal === 'bob')?.role).toBe('viewer');
    expect(await codeOf(s2.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }))).toBe('PERMISSION_DENIED');
    await s1.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    await Promise.all([i1, i2].map((it, n) => until(it, isResult, seen[n], 30_000, 'the result after the fail-over')));
    expect(readFileSync(join(stack.cwd, 'made.txt'), 'utf8')).toBe('hi\n');
    expect(processesIn(stack.cwd, 'claude')).toEqual(enginePids);
    for (const list of seen) seqsOf(list).forEach((v, n, all) => n && expect(v).toBe(all[n - 1] + 1));
    const engineMessages = seen[0]
      .filter((i) => i.kind === 'engine' && i.origin === 'engine')
      .map((i) => (i as { message: Record<string, unknown> }).message);
    expect(toolResults(engineMessages).filter((r) => !r.is_error)).toHaveLength(1);
  }, 120_000);

  it('a SIGKILL of the holding gateway during a burst of 10,000 frames: the client on another gateway gets each exactly once, in order (acks never outrun JetStream)', async () => {
    stack = await startClusterStack({ gateways: 2, engineCommand: BURST_ENGINE });
    dumpLogsOnFailure(stack);
    const alice = await stack.client(1, 'alice');
    const s = await alice.createSession({ agent: 'builder' });
    const seen: SessionItem[] = [];
    const it = s[Symbol.asyncIterator]();
    const isBurst = (i: SessionItem) => i.kind === 'engine' && i.message.type === 'assistant';
    await s.sendUserMessage('burst 10000');
    let read = 0;
    await until(it, (i) => isBurst(i) && ++read === 1500, seen, 30_000, 'the burst to be under way');
    expect((await stack.gateways[0].daemon.stop('SIGKILL')).signal).toBe('SIGKILL');
    await until(it, isResult, seen, 60_000, 'the burst to finish after the kill');
    const numbers = seen.filter(isBurst).map((i) => (i as unknown as { message: { n: number } }).message.n);
    expect(numbers.length).toBe(10_000);
    numbers.forEach((v, n) => v !== n && expect(v, `frame ${n}`).toBe(n));
    const seqs = seqsOf(seen);
    seqs.forEach((v, n) => n && v !== seqs[n - 1] + 1 && expect(v, `seq after ${seqs[n - 1]}`).toBe(seqs[n - 1] + 1));
    // It moved (perhaps after Alice read the whole burst from her gateway's mirror).
    await listedWhen(alice, s.id, (i) => i.gateway === stack!.gateways[1].id, 'the session to move to the second gateway');
  }, 120_000);

  it('the agent and a client on the holding gateway dial lists of gateway URLs: that gateway is SIGKILLed, both move along their lists, nothing lost or doubled', async () => {
    stack = await startClusterStack({ gateways: 3, scenario: LONG_TURN, agentDials: 'list' });
    dumpLogsOnFailure(stack);
    const { alice, s1, iters, seen } = await longTurnUnderWay(stack, 0, 2, 'list'); // Alice on the first gateway with the agent, then the others
    const enginePids = processesIn(stack.cwd, 'claude');
    expect((await stack.gateways[0].daemon.stop('SIGKILL')).signal).toBe('SIGKILL');
    await Promise.all(iters.map((it, n) => until(it, isResult, seen[n], 60_000, 'the turn to finish after the kill')));
    expectWholeTurn(seen);
    expect(processesIn(stack.cwd, 'claude')).toEqual(enginePids);
    await listedWhen(
      alice,
      s1.id,
      (i) => i.gateway === stack!.gateways[1].id,
      "the session to be held by the second gateway (next in the agent's list)",
    );
  }, 120_000);
});
