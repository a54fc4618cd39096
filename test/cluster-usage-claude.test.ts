/**
 * Issue 35 across a cluster, end to end: two `tether gateway --cluster` processes on a
 * nats-server run from deploy/nats-cluster.conf (so a missing permission shows), the real
 * Claude Code CLI against the scripted model. Turns of a session held by gateway B are read
 * on gateway A (`tether usage --json`) with their authors and sums, and a daily budget spent
 * on B refuses the person's next prompt on a session held by A; A started again reads the
 * stream back with nothing doubled.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { Agent } from '../agent/agent.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import type { UsageResult } from '../core/protocol/usage.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { runTether } from './support/cli.js';
import { startClusterStack, type ClusterStack } from './support/cluster-stack.js';
import { isResult, rejectionOf, until } from './support/items.js';
import { FAST_BACKOFF } from './support/restartable-stack.js';
import { hasTool } from './support/tools.js';
import { withTimeout } from './support/stack.js';

const NATS_CONFIG = fileURLToPath(new URL('../deploy/nats-cluster.conf', import.meta.url));
const TEARDOWN_MS = 60_000;
const BUDGET = { who: '*', per: 'day', tokens: 1500 };

/** One turn: `text` sent, read until its usage event (which follows the result). */
async function turn(s: RemoteSession, it: AsyncIterator<SessionItem>, text: string): Promise<void> {
  const seen: SessionItem[] = [];
  await s.sendUserMessage(text);
  await until(it, isResult, seen, 90_000, `the result of "${text}"`);
  await until(it, (i) => i.kind === 'event' && i.event.subtype === 'usage', seen, 10_000, 'the usage event');
}

describe.skipIf(!hasTool('nats-server'))("the cluster's usage ledger with the real CLI (issue 35)", () => {
  let stack: ClusterStack;
  let dir: TempDir;
  let other: Agent | undefined;
  beforeAll(async () => {
    dir = makeTempDir('tether-usage-policy-');
    const policy = join(dir.path, 'policy.json');
    writeFileSync(policy, JSON.stringify({ budgets: [BUDGET] }));
    stack = await startClusterStack({
      gateways: 2,
      scenario: {
        responses: [
          { text: 'For alice.', usage: { input_tokens: 1000, output_tokens: 100, cache_read_input_tokens: 40 } },
          { text: 'For bob.', usage: { input_tokens: 300, output_tokens: 30 } },
          { text: 'Alice again.', usage: { input_tokens: 500, output_tokens: 50 } },
        ],
      },
      nats: { config: { file: NATS_CONFIG, user: 'tether-gateway', passwordEnv: 'TETHER_NATS_PASSWORD' } },
      gatewayArgs: ['--policy', policy],
    });
  }, 120_000);
  afterAll(async () => {
    if (other) await withTimeout(other.shutdown(1_000), 10_000, 'the second agent to stop');
    await stack?.stop();
    dir?.cleanup();
  }, TEARDOWN_MS);

  /** `tether usage --by principal --json` asked of gateway `n` as `sub`. */
  const usageOn = async (n: number, sub: string, scopes?: string[]): Promise<UsageResult> => {
    const r = await runTether(['usage', '--by', 'principal', '--json', '--since', '1d'], {
      env: { TETHER_GATEWAY: stack.gateways[n].url, TETHER_TOKEN: await stack.token(sub, scopes) },
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout) as UsageResult;
  };

  it("turns of a session held by gateway B are read on gateway A with their authors and sums; a daily budget spent on B refuses the person's next prompt on a session held by A; A restarted reads the same, nothing doubled", async () => {
    onTestFailed(() => {
      for (const g of stack.gateways) process.stderr.write(`--- ${g.id} (${g.url})\n${g.daemon.stderr()}\n`);
    });
    // The stack's agent is behind the balancer: on gateway 0 (B), which holds its sessions.
    const alice = await (await stack.client(0, 'alice')).createSession({ agent: 'builder', options: { cwd: stack.cwd } });
    const bob = await (await stack.client(0, 'bob')).attach(alice.id);
    const ia = alice[Symbol.asyncIterator]();
    await turn(alice, ia, 'one');
    await turn(bob, ia, 'two');
    await turn(alice, ia, 'three'); // alice crosses her 1500 tokens here (1690)

    const onB = await usageOn(0, 'auditor', ['admin']);
    expect(onB.rows.map((r) => [r.key, r.turns, r.input_tokens, r.output_tokens, r.cache_read_input_tokens])).toEqual([
      ['alice', 2, 1500, 150, 40],
      ['bob', 1, 300, 30, 0],
    ]);
    // Gateway A booked none of these turns: it reads them from the cluster's stream (published once JetStream has them).
    const deadline = Date.now() + 15_000;
    let onA = await usageOn(1, 'auditor', ['admin']);
    while (onA.total.turns < 3 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      onA = await usageOn(1, 'auditor', ['admin']);
    }
    expect(onA).toEqual(onB);
    const bobsOnA = await usageOn(1, 'bob');
    expect([bobsOnA.scope, bobsOnA.rows.map((r) => [r.key, r.turns, r.input_tokens])]).toEqual(['own', [['bob', 1, 300]]]);

    // A second agent on gateway 1 (A): alice's session there is held by A, which admits prompts against the fleet's ledger.
    const home = makeTempDir('tether-home-');
    onTestFailed(() => home.cleanup());
    other = new Agent({
      gateway: stack.gateways[1].url,
      name: 'other',
      token: await stack.agentToken('other'),
      engine: 'claude',
      engineCommand: claudeBinaryPath(),
      engineEnv: claudeTestEnv({ home: home.path, baseUrl: stack.fake.url }),
      cwd: stack.cwd,
      backoff: FAST_BACKOFF,
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
    });
    await other.start();
    const onOther = await (await stack.client(1, 'alice')).createSession({ agent: 'other', options: { cwd: stack.cwd } });
    const calls = stack.fake.modelRequests().length;
    const refusal = await rejectionOf(onOther.sendUserMessage('NEVER_SENT_TEXT'));
    expect(refusal.code).toBe('RESOURCE_EXHAUSTED');
    const midnight = new Date(new Date().setUTCHours(24, 0, 0, 0)).toISOString();
    expect(refusal.message).toBe(
      `over budget: budgets[0] (who: *, per: day, tokens: 1500) is spent (1690 of 1500 tokens); it resets at ${midnight}`,
    );
    expect(stack.fake.modelRequests().length).toBe(calls);
    expect(stack.fake.requests.some((r) => r.raw.includes('NEVER_SENT_TEXT'))).toBe(false);
    await withTimeout(other.shutdown(1_000), 10_000, 'the second agent to stop');
    other = undefined;
    home.cleanup();

    // Gateway A starts again: it reads the stream back before it listens, each turn once.
    await stack.restartGateway(1);
    expect(await usageOn(1, 'auditor', ['admin'])).toEqual(onB);
    expect(await usageOn(0, 'auditor', ['admin'])).toEqual(onB);
  }, 300_000);
});
