import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import type { GatewayClient } from '../client/gateway-client.js';
import type { SessionInfo } from '../core/protocol/methods.js';
import { startClusterStack, type ClusterStack } from './support/cluster-stack.js';
import { codeOf, isCanUseTool, isResult, isWithdrawal, until } from './support/items.js';
import { processesIn, runTether } from './support/cli.js';
import { toolResults } from './support/turns.js';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { withTimeout } from './support/stack.js';
import { hasTool } from './support/tools.js';

const BURST_ENGINE = fileURLToPath(new URL('./support/burst-engine.mjs', import.meta.url));

const BASH_TURN = {
  responses: [{ text: 'Running it.', tool_use: { name: 'Bash', input: { command: 'echo hi >> made.txt', description: 'append a line' } } }, { text: 'Done.' }],
  fallback: { text: 'ok' },
};

/** A long answer streamed word by word, so a gateway can be killed in the middle of it. */
const WORDS = Array.from({ length: 80 }, (_, n) => `w${n}`);
const LONG_TURN = { responses: [{ text: WORDS.join(' '), chunk_delay_ms: 40 }], fallback: { text: 'ok' } };
const isDelta = (i: SessionItem) => i.kind === 'engine' && i.message.type === 'stream_event' && (i.message.event as { type?: string }).type === 'content_block_delta';
const deltaText = (items: SessionItem[]) => items.filter(isDelta).map((i) => ((i as unknown as { message: { event: { delta: { text?: string } } } }).message.event.delta.text ?? '')).join('');

/** Room for the cluster stack's teardown (clients, agent, balancer, fake, gateways, NATS; each step bounded). */
const TEARDOWN_MS = 90_000;

const seqsOf = (items: SessionItem[]) => items.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);

/**
 * Alice on gateway `a` (and, with `list`, the others after it) creates a session and asks for
 * the long answer, Bob on gateway `b` attaches; returns once each has seen 5 streamed words.
 */
async function longTurnUnderWay(stack: ClusterStack, a: number, b: number, aliceDials?: 'list') {
  const alice = await stack.client(a, 'alice', 'ws', aliceDials);
  const bob = await stack.client(b, 'bob');
  const s1 = await alice.createSession({ agent: 'builder', options: { include_partial_messages: true } });
  const s2 = await bob.attach(s1.id);
  const iters = [s1, s2].map((s) => s[Symbol.asyncIterator]());
  const seen: SessionItem[][] = [[], []];
  await s1.sendUserMessage('a long answer please');
  await Promise.all(iters.map(async (it, n) => {
    for (let k = 0; k < 5; k++) await until(it, isDelta, seen[n], 30_000, 'the stream to be under way');
  }));
  return { alice, bob, s1, iters, seen };
}

/** Each client saw the whole turn: seqs one by one (none lost, none doubled), every word exactly once, the same last seq. */
function expectWholeTurn(seen: SessionItem[][]): void {
  for (const list of seen) {
    const seqs = seqsOf(list);
    seqs.forEach((v, n) => n && expect(v, `seq after ${seqs[n - 1]}`).toBe(seqs[n - 1] + 1));
    expect(deltaText(list)).toBe(WORDS.join(' '));
  }
  expect(seqsOf(seen[1]).at(-1)).toBe(seqsOf(seen[0]).at(-1));
}

/**
 * Polls `client`'s listing until the session's entry satisfies `ok` (bounded); a listing that
 * fails because the connection was just cut (the session moved) is asked again.
 */
async function listedWhen(client: GatewayClient, id: string, ok: (info: SessionInfo) => boolean, what: string, ms = 30_000): Promise<SessionInfo> {
  const deadline = Date.now() + ms;
  for (;;) {
    const info = (await client.listSessions().catch(() => [])).find((x) => x.id === id);
    if (info && ok(info)) return info;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}: ${JSON.stringify(info)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A JSON-RPC dialect client (plain `ws`) on `url`: initialize, then session_attach; resolves with that answer. */
async function dialectAttach(url: string, token: string, sessionId: string): Promise<{ error: { message: string; data: { code: string } } }> {
  const ws = new WebSocket(url, 'tether-jsonrpc.v1', { headers: { authorization: `Bearer ${token}` } });
  try {
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const answers = new Map<number, (m: unknown) => void>();
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { id?: number };
      if (m.id !== undefined) answers.get(m.id)?.(m);
    });
    const request = (id: number, method: string, params: unknown) =>
      withTimeout(new Promise<unknown>((resolve) => (answers.set(id, resolve), ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params })))), 10_000, `the answer to ${method}`);
    await request(1, 'initialize', { protocol_version: '1.0', capabilities: [] });
    return (await request(2, 'session_attach', { session_id: sessionId })) as { error: { message: string; data: { code: string } } };
  } finally {
    ws.close();
  }
}

/** A failed test prints what each gateway logged. */
function dumpLogsOnFailure(stack: ClusterStack): void {
  onTestFailed(() => {
    for (const g of stack.gateways) process.stderr.write(`--- ${g.id} (${g.url})\n${g.daemon.stderr()}\n`);
  });
}

/** Several gateways on one NATS server: any client on any gateway drives a session held by another. */
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

    const engineMessages = seen[0].filter((i) => i.kind === 'engine' && i.origin === 'engine').map((i) => (i as { message: Record<string, unknown> }).message);
    expect(toolResults(engineMessages).filter((r) => !r.is_error)).toHaveLength(1);
    expect(readFileSync(join(stack.cwd, 'made.txt'), 'utf8')).toBe('hi\n');
    // Both saw one stream: seqs one by one, the same from the second's attach on.
    for (const list of seen) seqsOf(list).forEach((s, n, all) => n && expect(s).toBe(all[n - 1] + 1));
    const tail = seqsOf(seen[1]);
    expect(seqsOf(seen[0]).slice(-tail.length)).toEqual(tail);
    const audit = await s1.audit();
    expect(audit.filter((e) => e.action === 'permission_decision')).toEqual([expect.objectContaining({ request_id: ask.requestId, behavior: 'allow', principal: 'bob' })]);

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

  it('the first gateway is SIGKILLed mid-stream: the agent moves, the engine is not restarted, both clients resume with no frame lost or doubled', async () => {
    stack = await startClusterStack({ gateways: 3, scenario: LONG_TURN });
    dumpLogsOnFailure(stack);
    const { bob, s1, iters: [i1, i2], seen } = await longTurnUnderWay(stack, 1, 2);
    const arrivals: number[][] = [[], []];
    const watch = (n: number) => (i: SessionItem) => (arrivals[n].push(Date.now()), false);
    const enginePids = processesIn(stack.cwd, 'claude');
    expect(enginePids).toHaveLength(1);

    const killedAt = Date.now();
    expect((await stack.gateways[0].daemon.stop('SIGKILL')).signal).toBe('SIGKILL');
    await Promise.all([i1, i2].map((it, n) => until(it, (i) => (watch(n)(i), isResult(i)), seen[n], 60_000, 'the turn to finish after the kill')));
    const resumedMs = seen.map((list, n) => arrivals[n][0] - killedAt);

    expectWholeTurn(seen);
    expect(processesIn(stack.cwd, 'claude')).toEqual(enginePids); // the same engine all along
    const listed = (await bob.listSessions()).find((x) => x.id === s1.id);
    expect([stack.gateways[1].id, stack.gateways[2].id]).toContain(listed?.gateway);
    process.stdout.write(`fail-over: clients resumed ${resumedMs.join(' ms and ')} ms after the SIGKILL; frames lost 0, doubled 0\n`);
  }, 120_000);

  it('NATS restarted mid-session: the gateway holding it keeps serving its own clients, the other catches up, nothing lost or doubled', async () => {
    stack = await startClusterStack({ gateways: 2, scenario: LONG_TURN });
    dumpLogsOnFailure(stack);
    const { s1, iters: [i1, i2], seen } = await longTurnUnderWay(stack, 0, 1); // Alice on the gateway that holds the session

    await stack.nats.halt();
    // While NATS is away the holding gateway goes on serving its own client, and says so on /readyz.
    for (let k = 0; k < 5; k++) await until(i1, isDelta, seen[0], 10_000, 'frames while NATS is down');
    const ready = await fetch(new URL('/readyz', stack.gateways[0].url.replace('ws', 'http')));
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: Record<string, string> }).checks.cluster).toMatch(/NATS link down/);
    await stack.nats.restart();
    const t0 = Date.now();
    await Promise.all([i1, i2].map(async (it, n) => {
      await until(it, isResult, seen[n], 60_000, 'the turn to finish after NATS came back');
      process.stdout.write(`NATS restart: client ${n} finished the turn ${Date.now() - t0} ms after NATS was back\n`);
    }));
    expectWholeTurn(seen);
    // What was held meanwhile reached JetStream: a newcomer on the other gateway reads the whole turn.
    const late = await (await stack.client(1, 'carol')).attach(s1.id);
    const got: SessionItem[] = [];
    await until(late[Symbol.asyncIterator](), isResult, got, 20_000, 'the whole turn from JetStream');
    expect(deltaText(got)).toBe(WORDS.join(' '));
    expect(seqsOf(got)[0]).toBe(1);
  }, 120_000);

  it('a pending permission prompt and the owner\'s role decisions survive the SIGKILL of the gateway holding the session; the tool runs once', async () => {
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
    const info = await listedWhen(bob, s1.id, (i) => i.gateway !== stack!.gateways[0].id && i.state === 'requires_action' && i.clients.length === 2, 'the session to come back with its prompt');
    expect(info.pending_prompts).toBe(1);
    expect(info.clients.find((c) => c.principal === 'bob')?.role).toBe('viewer');
    expect(await codeOf(s2.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }))).toBe('PERMISSION_DENIED');
    await s1.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    await Promise.all([i1, i2].map((it, n) => until(it, isResult, seen[n], 30_000, 'the result after the fail-over')));
    expect(readFileSync(join(stack.cwd, 'made.txt'), 'utf8')).toBe('hi\n');
    expect(processesIn(stack.cwd, 'claude')).toEqual(enginePids);
    for (const list of seen) seqsOf(list).forEach((v, n, all) => n && expect(v).toBe(all[n - 1] + 1));
    const engineMessages = seen[0].filter((i) => i.kind === 'engine' && i.origin === 'engine').map((i) => (i as { message: Record<string, unknown> }).message);
    expect(toolResults(engineMessages).filter((r) => !r.is_error)).toHaveLength(1);
  }, 120_000);

  it('the agent loses only its link to the gateway holding the session (which stays up): the session moves, that gateway lets go, every client resumes', async () => {
    stack = await startClusterStack({ gateways: 3, scenario: LONG_TURN });
    dumpLogsOnFailure(stack);
    const { alice, bob, s1, iters: [i1, i2], seen } = await longTurnUnderWay(stack, 0, 2); // Alice on the holding gateway itself
    const enginePids = processesIn(stack.cwd, 'claude');
    stack.balancer.drain(0); // the agent reconnects to the second gateway; the first is still there
    await Promise.all([i1, i2].map((it, n) => until(it, isResult, seen[n], 60_000, 'the turn to finish after the move')));
    expectWholeTurn(seen);
    expect(processesIn(stack.cwd, 'claude')).toEqual(enginePids);
    const everywhere = await Promise.all([alice, bob].map(async (c) => (await c.listSessions()).filter((x) => x.id === s1.id).map((x) => x.gateway)));
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
    await Promise.race([done, new Promise((_, reject) => setTimeout(() => reject(new Error('the turn did not finish within 30 s')), 30_000))]);
    const later = [...arrivals[0]].filter(([seq]) => arrivals[1].has(seq)).map(([seq, t]) => arrivals[1].get(seq)! - t).sort((a, b) => a - b);
    expect(later.length).toBeGreaterThan(WORDS.length);
    expect([...arrivals[1].keys()]).toEqual([...arrivals[0].keys()].filter((seq) => seq >= Math.min(...arrivals[1].keys())));
    const pct = (p: number) => later[Math.min(later.length - 1, Math.floor(p * later.length))].toFixed(1);
    process.stdout.write(`remote client vs local client, ${later.length} frames: +${pct(0.5)} ms median, +${pct(0.95)} ms p95\n`);
    expect(Number(pct(0.5))).toBeLessThan(250); // a sanity bound on a shared machine, not a benchmark
  }, 60_000);

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
    await listedWhen(alice, s1.id, (i) => i.gateway === stack!.gateways[1].id, 'the session to be held by the second gateway (next in the agent\'s list)');
  }, 120_000);
});
