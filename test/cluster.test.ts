import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import { startClusterStack, type ClusterStack } from './support/cluster-stack.js';
import {
  BASH_TURN,
  WORDS,
  LONG_TURN,
  isDelta,
  deltaText,
  TEARDOWN_MS,
  seqsOf,
  longTurnUnderWay,
  expectWholeTurn,
  dialectAttach,
  dumpLogsOnFailure,
} from './support/cluster-turns.js';
import { codeOf, isCanUseTool, isResult, isWithdrawal, until } from './support/items.js';
import { processesIn, runTether } from './support/cli.js';
import { toolResults } from './support/turns.js';
import { hasTool } from './support/tools.js';

/** Several gateways on one NATS server: any client on any gateway drives a session held by another (a gateway SIGKILLed: cluster-sigkill.test.ts). */
describe.skipIf(!hasTool('nats-server'))('a cluster of three gateways', () => {
  let stack: ClusterStack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  }, TEARDOWN_MS); // each step of the stack's stop is bounded; together they may outlast the default hook timeout

  it('agent on the first, clients on the second and third share a session: an answer on the third is withdrawn on the second and the tool runs once', async () => {
    stack = await startClusterStack({ gateways: 3, scenario: BASH_TURN, gatewayArgs: ['--log-level', 'debug', '--log-format', 'json'] });
    dumpLogsOnFailure(stack);
    const alice = await stack.client(1, 'alice');
    const bob = await stack.client(2, 'bob', 'grpc'); // routing is transport-blind across gateways too
    // Created through the second gateway: made on the first, where the agent is.
    const s1 = await alice.createSession({ agent: 'builder' });
    expect(s1.role).toBe('owner');
    const s2 = await bob.attach(s1.id);
    expect(s2.role).toBe('controller');
    const [i1, i2] = [s1, s2].map((s) => s[Symbol.asyncIterator]());
    const seen: SessionItem[][] = [[], []];

    await s1.sendUserMessage('append a line');
    const prompts = await Promise.all([i1, i2].map((it, n) => until(it, isCanUseTool, seen[n], 30_000, 'the permission prompt')));
    expect((prompts[1] as { line: string }).line).toBe((prompts[0] as { line: string }).line);
    const ask = asPermissionRequest((prompts[1] as { message: Record<string, unknown> }).message)!;

    await s2.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    expect(await codeOf(s1.answer(ask.requestId, { behavior: 'deny', message: 'too late' }))).toBe('FAILED_PRECONDITION');
    await until(i1, isWithdrawal(ask.requestId), seen[0], 10_000, 'the withdrawal on the second gateway');
    await Promise.all([i1, i2].map((it, n) => until(it, isResult, seen[n], 30_000, 'the result')));

    const engineMessages = seen[0]
      .filter((i) => i.kind === 'engine' && i.origin === 'engine')
      .map((i) => (i as { message: Record<string, unknown> }).message);
    expect(toolResults(engineMessages).filter((r) => !r.is_error)).toHaveLength(1);
    expect(readFileSync(join(stack.cwd, 'made.txt'), 'utf8')).toBe('hi\n');
    // Both saw one stream: seqs one by one, the same from the second's attach on.
    for (const list of seen) seqsOf(list).forEach((s, n, all) => n && expect(s).toBe(all[n - 1] + 1));
    const tail = seqsOf(seen[1]);
    expect(seqsOf(seen[0]).slice(-tail.length)).toEqual(tail);
    const audit = await s1.audit();
    expect(audit.filter((e) => e.action === 'permission_decision')).toEqual([
      expect.objectContaining({ request_id: ask.requestId, behavior: 'allow', principal: 'bob' }),
    ]);

    // Every gateway lists the fleet and says which gateway holds what.
    const [g1, g2, g3] = stack.gateways;
    const listed = (await bob.listSessions()).find((x) => x.id === s1.id);
    expect(listed?.gateway).toBe(g1.id);
    expect(listed?.clients.map((c) => c.principal).sort()).toEqual(['alice', 'bob']);
    // A session's details come from its home, through any gateway.
    expect(await bob.getSession(s1.id)).toMatchObject({ id: s1.id, owner: 'alice', agent: 'builder' });
    const agents = await alice.listAgents();
    expect(agents.map((a) => [a.name, a.gateway])).toEqual([['builder', g1.id]]);
    expect([g2.id, g3.id]).not.toContain(g1.id);
    // The CLI shows it too, from any gateway, and the holding gateway's metrics count it.
    const env = { TETHER_TOKEN: await stack.token('carol') };
    const sessions = await runTether(['sessions', '--gateway', g3.url], { env });
    expect(sessions.stdout.split('\n')[0]).toMatch(/GATEWAY$/);
    expect(sessions.stdout).toMatch(new RegExp(`${s1.id}.*${g1.id}`));
    const agentsOut = await runTether(['agents', '--gateway', g2.url], { env });
    expect(agentsOut.stdout).toMatch(new RegExp(`builder.*${g1.id}`));
    // A JSON-RPC dialect client reaches only the sessions its own gateway holds: told so, with the holder.
    const refusal = await dialectAttach(g3.url, await stack.token('carol'), s1.id);
    expect(refusal.error.data.code).toBe('FAILED_PRECONDITION');
    expect(refusal.error.message).toContain(`held by gateway ${g1.id}`);
    const metrics = await (await fetch(new URL('/metrics', g1.url.replace('ws', 'http')))).text();
    expect(metrics).toContain(`tether_cluster_sessions_held{gateway="${g1.id}"} 1`);
    expect(metrics).toContain(`tether_cluster_agents_held{gateway="${g1.id}"} 1`);
    expect(metrics).toContain(`tether_cluster_link_up{gateway="${g1.id}"} 1`);
  }, 120_000);

  it('NATS restarted mid-session: the gateway holding it keeps serving its own clients, the other catches up, nothing lost or doubled', async () => {
    stack = await startClusterStack({ gateways: 2, scenario: LONG_TURN });
    dumpLogsOnFailure(stack);
    const {
      s1,
      iters: [i1, i2],
      seen,
    } = await longTurnUnderWay(stack, 0, 1); // Alice on the gateway that holds the session

    await stack.nats.halt();
    // While NATS is away the holding gateway goes on serving its own client, and says so on /readyz.
    for (let k = 0; k < 5; k++) await until(i1, isDelta, seen[0], 10_000, 'frames while NATS is down');
    const ready = await fetch(new URL('/readyz', stack.gateways[0].url.replace('ws', 'http')));
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: Record<string, string> }).checks.cluster).toMatch(/NATS link down/);
    await stack.nats.restart();
    const t0 = Date.now();
    await Promise.all(
      [i1, i2].map(async (it, n) => {
        await until(it, isResult, seen[n], 60_000, 'the turn to finish after NATS came back');
        process.stdout.write(`NATS restart: client ${n} finished the turn ${Date.now() - t0} ms after NATS was back\n`);
      }),
    );
    expectWholeTurn(seen);
    // What was held meanwhile reached JetStream: a newcomer on the other gateway reads the whole turn.
    const late = await (await stack.client(1, 'carol')).attach(s1.id);
    const got: SessionItem[] = [];
    await until(late[Symbol.asyncIterator](), isResult, got, 20_000, 'the whole turn from JetStream');
    expect(deltaText(got)).toBe(WORDS.join(' '));
    expect(seqsOf(got)[0]).toBe(1);
  }, 120_000);

  it('the agent loses only its link to the gateway holding the session (which stays up): the session moves, that gateway lets go, every client resumes', async () => {
    stack = await startClusterStack({ gateways: 3, scenario: LONG_TURN });
    dumpLogsOnFailure(stack);
    const {
      alice,
      bob,
      s1,
      iters: [i1, i2],
      seen,
    } = await longTurnUnderWay(stack, 0, 2); // Alice on the holding gateway itself
    const enginePids = processesIn(stack.cwd, 'claude');
    stack.balancer.drain(0); // the agent reconnects to the second gateway; the first is still there
    await Promise.all([i1, i2].map((it, n) => until(it, isResult, seen[n], 60_000, 'the turn to finish after the move')));
    expectWholeTurn(seen);
    expect(processesIn(stack.cwd, 'claude')).toEqual(enginePids);
    const everywhere = await Promise.all(
      [alice, bob].map(async (c) => (await c.listSessions()).filter((x) => x.id === s1.id).map((x) => x.gateway)),
    );
    expect(everywhere).toEqual([[stack.gateways[1].id], [stack.gateways[1].id]]); // held once, by the second
  }, 120_000);

  it('a client on another gateway gets the same frames as one on the holding gateway, about as soon (measured)', async () => {
    stack = await startClusterStack({ gateways: 2, scenario: LONG_TURN });
    dumpLogsOnFailure(stack);
    const local = await (await stack.client(0, 'alice')).createSession({ agent: 'builder', options: { include_partial_messages: true } });
    const remote = await (await stack.client(1, 'bob')).attach(local.id);
    const arrivals = [new Map<number, number>(), new Map<number, number>()];
    const read = async (s: typeof local, at: Map<number, number>) => {
      for await (const item of s) {
        if (item.kind === 'reply') continue;
        at.set(item.seq, performance.now());
        if (isResult(item)) return;
      }
    };
    const done = Promise.all([read(local, arrivals[0]), read(remote, arrivals[1])]);
    await local.sendUserMessage('a long answer please');
    await Promise.race([
      done,
      new Promise((_, reject) => setTimeout(() => reject(new Error('the turn did not finish within 30 s')), 30_000)),
    ]);
    const later = [...arrivals[0]]
      .filter(([seq]) => arrivals[1].has(seq))
      .map(([seq, t]) => arrivals[1].get(seq)! - t)
      .sort((a, b) => a - b);
    expect(later.length).toBeGreaterThan(WORDS.length);
    expect([...arrivals[1].keys()]).toEqual([...arrivals[0].keys()].filter((seq) => seq >= Math.min(...arrivals[1].keys())));
    const pct = (p: number) => later[Math.min(later.length - 1, Math.floor(p * later.length))].toFixed(1);
    process.stdout.write(`remote client vs local client, ${later.length} frames: +${pct(0.5)} ms median, +${pct(0.95)} ms p95\n`);
    expect(Number(pct(0.5))).toBeLessThan(250); // a sanity bound on a shared machine, not a benchmark
  }, 60_000);
});
