import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import { Policy } from '../core/policy/policy.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { ACP_AGENTS, BIN_DIR, startAcpRig, type AcpAgentName } from './support/acp-agents.js';
import { cleanupsPerTest } from './support/cleanups.js';
import type { FakeScenario } from './support/fake-anthropic.js';
import { codeOf, isCanUseTool, isResult, until } from './support/items.js';
import { FAST_BACKOFF } from './support/restartable-stack.js';
import { startTcpProxy } from './support/tcp-proxy.js';
import { toolResults } from './support/turns.js';

/**
 * Real ACP agents as Tether engines (issue 37): OpenCode and Claude Code's ACP adapter, each
 * driven by the scripted Messages API on loopback. A tool call that needs permission reaches
 * every member; a second client answers while a viewer watches; a denial keeps the file from
 * being written; a policy deny by path holds without asking anyone.
 */

/** The model's write tool, as each agent names it (claude-code-acp routes writes through the client: mcp__acp__Write). */
const writeTurn = (name: AcpAgentName, path: string): FakeScenario => ({
  responses: [
    {
      text: 'Writing it.',
      tool_use:
        name === 'opencode'
          ? { name: 'write', input: { filePath: path, content: 'hello from acp\n' } }
          : { name: 'mcp__acp__Write', input: { file_path: path, content: 'hello from acp\n' } },
    },
    { text: 'Done writing.' },
  ],
  fallback: { text: 'OK.' },
});

const TURN_MS = 90_000;
const engineMessages = (seen: SessionItem[]) =>
  seen.filter((i) => i.kind === 'engine' && i.origin === 'engine').map((i) => (i as { message: Record<string, unknown> }).message);

let savedPath: string | undefined;
beforeAll(() => {
  savedPath = process.env.PATH; // the claude-acp preset's program is looked up on the agent's PATH
  process.env.PATH = `${BIN_DIR}:${savedPath}`;
});
afterAll(() => {
  process.env.PATH = savedPath;
});

describe.each(ACP_AGENTS)('ACP engine: %s', (name) => {
  const cleanups = cleanupsPerTest();

  it('a tool call asks; a second client allows it while a viewer watches; the file is written once', async () => {
    const rig0 = cleanups.own(await startAcpRig(name, { responses: [] }));
    const file = join(rig0.cwd, 'made.txt');
    rig0.fake.setScenario(writeTurn(name, file));
    const [c1, c2, v] = [await rig0.stack.client(), await rig0.stack.client(), await rig0.stack.client()];
    const owner = await c1.createSession({ agent: 'test-agent' });
    const second = await c2.attach(owner.id);
    const viewer = await v.attach(owner.id, { readOnly: true });
    expect(viewer.role).toBe('viewer');
    const its = [owner, second, viewer].map((s) => s[Symbol.asyncIterator]());
    const seen: SessionItem[][] = [[], [], []];
    await owner.sendUserMessage('write made.txt');
    const prompts = await Promise.all(its.map((it, n) => until(it, isCanUseTool, seen[n], TURN_MS, 'the permission prompt')));
    const ask = asPermissionRequest((prompts[0] as { message: Record<string, unknown> }).message)!;
    expect(ask.toolName).toBe('Edit');
    expect(ask.input.file_path).toBe(file);
    expect(ask.input.acp_kind).toBe('edit');
    expect(existsSync(file)).toBe(false);
    expect(await codeOf(viewer.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }))).toBe('PERMISSION_DENIED');
    await second.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    const results = await Promise.all(its.map((it, n) => until(it, isResult, seen[n], TURN_MS, 'the result')));
    expect(results.map((r) => (r as { message: Record<string, unknown> }).message.is_error)).toEqual([false, false, false]);
    expect(readFileSync(file, 'utf8')).toBe('hello from acp\n');
    const messages = engineMessages(seen[2]);
    const toolUse = messages
      .flatMap((m) => ((m.message as { content?: unknown[] })?.content ?? []) as Record<string, unknown>[])
      .find((b) => b.type === 'tool_use');
    expect(toolUse).toMatchObject({ name: 'Edit', input: { file_path: file, acp_kind: 'edit' } });
    expect(toolResults(messages).filter((r) => !r.is_error)).toHaveLength(1);
    const text = messages
      .filter((m) => m.type === 'assistant')
      .flatMap((m) =>
        ((m.message as { content: Record<string, unknown>[] }).content ?? []).filter((b) => b.type === 'text').map((b) => b.text),
      );
    expect(text).toContain('Done writing.');
    const audit = await owner.audit();
    expect(audit.filter((e) => e.action === 'permission_decision')).toEqual([
      expect.objectContaining({ request_id: ask.requestId, behavior: 'allow' }),
    ]);
  }, 180_000);

  it('a denied call never runs: the file does not exist and the model is told', async () => {
    const rig = cleanups.own(await startAcpRig(name, { responses: [] }));
    const file = join(rig.cwd, 'denied.txt');
    rig.fake.setScenario(writeTurn(name, file));
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('write denied.txt');
    const prompt = await until(it, isCanUseTool, seen, TURN_MS, 'the permission prompt');
    const ask = asPermissionRequest((prompt as { message: Record<string, unknown> }).message)!;
    await session.answer(ask.requestId, { behavior: 'deny', message: 'Not this one' });
    await until(it, isResult, seen, TURN_MS, 'the result');
    expect(existsSync(file)).toBe(false);
    expect(toolResults(engineMessages(seen)).some((r) => r.is_error)).toBe(true);
    // Whether the model hears of it is the agent's choice (claude-code-acp ends the turn on a refusal).
    const told = rig.fake.lastToolResults().at(-1);
    if (told) expect(told.is_error).toBe(true);
  }, 180_000);

  it('a policy deny by path holds: nobody is asked and the file is not written', async () => {
    const policy = new StaticPolicy(Policy.compile({ permissions: { deny: ['Edit(/secret/**)'], ask: [], allow: [] } }));
    const rig = cleanups.own(await startAcpRig(name, { responses: [] }, { policy }));
    const file = join(rig.cwd, 'secret', 'key.txt');
    rig.fake.setScenario(writeTurn(name, file));
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('write the secret');
    await until(it, isResult, seen, TURN_MS, 'the result');
    expect(seen.some(isCanUseTool)).toBe(false);
    expect(existsSync(file)).toBe(false);
    const audit = await session.audit();
    expect(audit.some((e) => e.action === 'policy_decision' && (e as { decision?: string }).decision === 'deny')).toBe(true);
  }, 180_000);

  it('a client link cut while the prompt waits: the client comes back, answers, and sees every frame once', async () => {
    const rig = cleanups.own(await startAcpRig(name, { responses: [] }));
    const file = join(rig.cwd, 'after-cut.txt');
    rig.fake.setScenario(writeTurn(name, file));
    const proxy = await startTcpProxy(rig.stack.url);
    cleanups.push(() => proxy.close());
    const client = await GatewayClient.connect({ gateway: proxy.url, token: rig.stack.token, reconnect: true });
    cleanups.push(() => client.close());
    const session = await client.createSession({ agent: 'test-agent', options: { include_partial_messages: true } });
    // The reference: a client never cut, attached from the first frame.
    const reference = await (await rig.stack.client()).attach(session.id, { fromSeq: 1 });
    const refItems: SessionItem[] = [];
    const refDone = until(reference[Symbol.asyncIterator](), isResult, refItems, TURN_MS, 'the reference to see the result');
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('write after-cut.txt');
    const prompt = await until(it, isCanUseTool, seen, TURN_MS, 'the permission prompt');
    proxy.cut(700);
    const ask = asPermissionRequest((prompt as { message: Record<string, unknown> }).message)!;
    await session.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }); // retried across the reconnect
    await until(it, isResult, seen, TURN_MS, 'the result after the reconnect');
    await refDone;
    expect(readFileSync(file, 'utf8')).toBe('hello from acp\n');
    const seqs = seen.flatMap((i) => (i.kind === 'reply' ? [] : [i.seq]));
    expect(seqs.every((q, n) => n === 0 || q === seqs[n - 1]! + 1)).toBe(true);
    const refSeqs = refItems.flatMap((i) => (i.kind === 'reply' ? [] : [i.seq]));
    expect(seqs).toEqual(refSeqs.slice(refSeqs.indexOf(seqs[0]!)));
  }, 180_000);

  it("the agent's link cut while the prompt waits: the engine runs on, the answer reaches it after the reconnect, nothing lost or doubled", async () => {
    const rig = cleanups.own(await startAcpRig(name, { responses: [] }));
    const file = join(rig.cwd, 'agent-cut.txt');
    rig.fake.setScenario(writeTurn(name, file));
    const proxy = await startTcpProxy(rig.stack.url);
    cleanups.push(() => proxy.close());
    const token = await rig.stack.mint({ kind: 'agent', sub: 'cut-agent', agent: 'cut-agent' });
    const agent = new Agent({
      gateway: proxy.url,
      name: 'cut-agent',
      token,
      ...rig.engine,
      cwd: rig.cwd,
      backoff: FAST_BACKOFF,
      eofGraceMs: 2_000,
      termGraceMs: 2_000,
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const session = await (await rig.stack.client()).createSession({ agent: 'cut-agent' });
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('write agent-cut.txt');
    const prompt = await until(it, isCanUseTool, seen, TURN_MS, 'the permission prompt');
    const connectionsBefore = proxy.connections;
    proxy.cut(700);
    const ask = asPermissionRequest((prompt as { message: Record<string, unknown> }).message)!;
    await session.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }); // held at the gateway until the agent is back
    await until(it, isResult, seen, TURN_MS, 'the result after the agent reconnected');
    expect(proxy.connections).toBeGreaterThan(connectionsBefore);
    expect(readFileSync(file, 'utf8')).toBe('hello from acp\n');
    const seqs = seen.flatMap((i) => (i.kind === 'reply' ? [] : [i.seq]));
    expect(seqs.every((q, n) => n === 0 || q === seqs[n - 1]! + 1)).toBe(true);
    const texts = engineMessages(seen)
      .filter((m) => m.type === 'assistant')
      .flatMap((m) => (m.message as { content: Record<string, unknown>[] }).content.filter((b) => b.type === 'text').map((b) => b.text));
    expect(texts.filter((t) => t === 'Done writing.')).toHaveLength(1);
  }, 180_000);
});
