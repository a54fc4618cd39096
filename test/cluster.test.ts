import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import { startClusterStack, type ClusterStack } from './support/cluster-stack.js';
import { codeOf, isCanUseTool, isResult, isWithdrawal, until } from './support/items.js';
import { toolResults } from './support/turns.js';

const BASH_TURN = {
  responses: [{ text: 'Running it.', tool_use: { name: 'Bash', input: { command: 'echo hi >> made.txt', description: 'append a line' } } }, { text: 'Done.' }],
  fallback: { text: 'ok' },
};

const seqsOf = (items: SessionItem[]) => items.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);

/** A failed test prints what each gateway logged. */
function dumpLogsOnFailure(stack: ClusterStack): void {
  onTestFailed(() => {
    for (const g of stack.gateways) process.stderr.write(`--- ${g.id} (${g.url})\n${g.daemon.stderr()}\n`);
  });
}

/** Several gateways on one NATS server: any client on any gateway drives a session held by another. */
describe('a cluster of three gateways', () => {
  let stack: ClusterStack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it('agent on the first, clients on the second and third share a session: an answer on the third is withdrawn on the second and the tool runs once', async () => {
    stack = await startClusterStack({ gateways: 3, scenario: BASH_TURN, gatewayArgs: ['--log-level', 'debug', '--log-format', 'json'] });
    dumpLogsOnFailure(stack);
    const alice = await stack.client(1, 'alice');
    const bob = await stack.client(2, 'bob');
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
    const agents = await alice.listAgents();
    expect(agents.map((a) => [a.name, a.gateway])).toEqual([['builder', g1.id]]);
    expect([g2.id, g3.id]).not.toContain(g1.id);
  }, 120_000);
});
