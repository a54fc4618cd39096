/**
 * Issue 13, findings 4 and 7: inputs are checked before anything is kept; one bad item never
 * takes down an agent or its other sessions; agent registration is all or nothing; a session
 * whose engine failed to start is not kept.
 */
import { appendFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { LinkStatus } from '../core/link/link.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { randomUUID } from 'node:crypto';
import { Agent } from '../agent/agent.js';
import { memoryChannelPair } from '../core/channel/memory.js';
import { Dialers } from '../core/link/dial.js';
import { PROTOCOL_VERSION } from '../core/protocol/version.js';
import { RpcPeer } from '../core/rpc/peer.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { MAX_INPUT_DEPTH } from '../core/protocol/engine-input.js';
import { codeOf, isResult, until } from './support/items.js';
import { rawClient } from './support/raw-client.js';
import { startRestartable, type RestartableStack } from './support/restartable-stack.js';
import { FileSessionStore, type StoredFrame } from '../gateway/session/session-store.js';
import { waitFor } from './support/wait.js';

/** `{"type":"user",…}` whose content is `depth` arrays nested in one another. */
function deepUserLine(depth: number): Record<string, unknown> {
  let v: unknown[] = [];
  for (let n = 1; n < depth; n++) v = [v];
  return { type: 'user', message: { role: 'user', content: v } };
}

/** The same, as JSON text (too deep for JSON.stringify on any stack). */
function deepUserText(depth: number): string {
  return `{"type":"user","message":{"role":"user","content":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
}

/** Input records in a session's log in the file store. */
function storedInputs(state: string, sessionId: string): string[] {
  const log = join(state, sessionId, 'log.ndjson');
  return existsSync(log)
    ? readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('{"i":'))
    : [];
}

async function turnWorks(session: RemoteSession, text: string): Promise<void> {
  const it = session[Symbol.asyncIterator]();
  await session.sendUserMessage(text);
  const seen: SessionItem[] = [];
  const result = (await until(it, isResult, seen, 20_000, `the result of "${text}"`)) as { message: Record<string, unknown> };
  expect(result.message.is_error).toBe(false);
}

let stack: RestartableStack | undefined;
/** What a test started besides the stack, stopped after it. */
const cleanups = cleanupsPerTest();
afterEach(async () => {
  await stack?.stop();
  stack = undefined;
});

describe.each([
  ['ws', 'demo'],
  ['grpc', 'demo'],
  ['ws', 'claude'],
] as const)('inputs over %s (%s engine)', (t, engine) => {
  it('a line nested 4,106 arrays deep is refused with INVALID_ARGUMENT and leaves nothing behind; after a restart the agent is up and both sessions work', async () => {
    const statuses: LinkStatus['state'][] = [];
    stack = await startRestartable({ engine, agentOptions: { onStatus: (s) => statuses.push(s.state) } });
    const alice = await stack.client(t, 'alice');
    const [poisoned, other] = [await alice.createSession({ agent: 'builder' }), await alice.createSession({ agent: 'builder' })];

    // Sent as raw text, the way a hostile client would (our own library cannot even serialize it on every stack).
    const raw = await rawClient(stack.url(t), await stack.token('alice'));
    expect((await raw.call('session.attach', JSON.stringify({ session_id: poisoned.id }))).error).toBeUndefined();
    const lastSeq = stack.gateway.directory.get(poisoned.id)!.info().last_seq;
    const deep = await raw.call('session.send', `{"session_id":"${poisoned.id}","input_id":"deep-1","line":${deepUserText(4106)}}`);
    expect(deep.error?.data?.code).toBe('INVALID_ARGUMENT');
    expect(deep.error?.message).toContain(`deeper than ${MAX_INPUT_DEPTH}`);
    expect(await codeOf(poisoned.send(deepUserLine(MAX_INPUT_DEPTH), 'deep-2'))).toBe('INVALID_ARGUMENT'); // the envelope adds 3 levels
    expect(await codeOf(poisoned.send({ type: 'user', message: { role: 'user', content: 'x'.repeat(17 * 1024 * 1024) } }, 'big'))).toBe(
      'INVALID_ARGUMENT',
    );
    expect(storedInputs(stack.state, poisoned.id)).toEqual([]);
    expect(stack.gateway.directory.get(poisoned.id)!.info().last_seq).toBe(lastSeq); // no prompt event either
    // The same input id is free again: a refused line was never recorded as applied.
    expect(await poisoned.send({ type: 'keep_alive' }, 'deep-1')).toBe('applied');
    raw.close();

    await stack.restart();
    expect(statuses).not.toContain('closed');
    expect(stack.agent.sessionCount).toBe(2);
    const bob = await stack.client(t, 'alice');
    await turnWorks(await bob.attach(other.id), 'the other session still works');
    await turnWorks(await bob.attach(poisoned.id), 'and so does the one that was sent the bad line');
  }, 60_000);
});

describe('a bad item in one session never takes down the agent', () => {
  it('a poisoned input written into the store is dropped at restore: the hello succeeds, the agent stays up, its sessions work, no ghost', async () => {
    const statuses: LinkStatus['state'][] = [];
    stack = await startRestartable({ agentOptions: { onStatus: (s) => statuses.push(s.state) } });
    const alice = await stack.client('ws', 'alice');
    const [poisoned, other] = [await alice.createSession({ agent: 'builder' }), await alice.createSession({ agent: 'builder' })];
    const state = stack.state;
    // As an older gateway would have kept it: seq 99 was never written, so it is re-sent at the hello.
    await stack.restart(() =>
      appendFileSync(join(state, poisoned.id, 'log.ndjson'), `{"i":99,"k":"alice\\u0000evil","l":${deepUserText(100_000)}}\n`),
    );

    expect(statuses).not.toContain('closed');
    expect(stack.gateway.directory.agent('builder')?.peer.channel.isClosed).toBe(false);
    expect(stack.agent.sessionCount).toBe(2);
    const again = await stack.client('ws', 'alice');
    await turnWorks(await again.attach(other.id), 'the other session works after the restart');
    await turnWorks(await again.attach(poisoned.id), 'the poisoned session works too');
  }, 60_000);

  it("the agent refuses a line it cannot take (an event to the session's clients, acked), without throwing; the session and its neighbour carry on", async () => {
    // The agent's gateway is this test, over a memory channel handed to the agent as its only
    // transport: it can send what a real gateway would refuse to forward.
    const [agentEnd, gatewayEnd] = memoryChannelPair();
    const cwd = cleanups.tempDir('tether-input-cwd-');
    const agent = new Agent({
      gateway: 'test-gateway://here',
      name: 'builder',
      engine: 'demo',
      cwd: cwd.path,
      dialers: new Dialers([['test-gateway:', async () => agentEnd]]),
    });
    const gateway = new RpcPeer(gatewayEnd);
    const events: { session_id: string; event: { subtype: string; code?: string; message?: string } }[] = [];
    const acks: { session_id: string; seq: number }[] = [];
    const results: string[] = [];
    gateway
      .onRequest('hello', () => ({
        protocol_version: PROTOCOL_VERSION,
        gateway_id: 'test-gateway',
        capabilities: [],
        principal: 'builder',
      }))
      .onNotification('session.event', (p) => void events.push(p as (typeof events)[number]))
      .onNotification('session.input_ack', (p) => void acks.push(p))
      .onBinaryNotification('session.output', (p, body) => {
        if (Buffer.from(body).toString().startsWith('{"type":"result"')) results.push(p.session_id);
      });
    void gateway.run();
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const [bad, other] = [randomUUID(), randomUUID()];
    for (const session_id of [bad, other]) await gateway.request('agent.spawn', { session_id, options: {} });

    await gateway.notify('agent.input', { session_id: bad, seq: 1_000, line: deepUserLine(4106) });
    await waitFor(() => events.some((e) => e.session_id === bad && e.event.subtype === 'engine_error'), 10_000, 'the engine_error event');
    expect(events.find((e) => e.session_id === bad)).toMatchObject({
      event: { code: 'INPUT_NOT_WRITTEN', message: expect.stringContaining(`deeper than ${MAX_INPUT_DEPTH}`) },
    });
    await waitFor(() => acks.some((a) => a.session_id === bad && a.seq === 1_000), 10_000, 'the refused line acked');

    await gateway.notify('agent.input', {
      session_id: other,
      seq: 1,
      line: { type: 'user', message: { role: 'user', content: 'the neighbour works' } },
    });
    await waitFor(() => results.includes(other), 15_000, "the neighbour's result");
    expect(agent.sessionCount).toBe(2);
  }, 60_000);
});

/** A real file store whose frame writes can be made to fail (a full disk, a dead mount). */
class BreakableStore extends FileSessionStore {
  failing: ((sessionId: string, frame: string) => boolean) | undefined;
  override appendFrame(sessionId: string, frame: StoredFrame): void {
    if (this.failing?.(sessionId, frame.bytes.toString()))
      throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    super.appendFrame(sessionId, frame);
  }
}

describe('agent registration is all or nothing', () => {
  it('a session that cannot be re-bound at the hello is ended alone; a hello that fails leaves no agent listed', async () => {
    let store!: BreakableStore;
    stack = await startRestartable({ store: (dir) => (store = new BreakableStore(dir)) });
    const alice = await stack.client('ws', 'alice');
    const [broken, other] = [await alice.createSession({ agent: 'builder' }), await alice.createSession({ agent: 'builder' })];
    const backToIdle = (id: string, frame: string) => id === broken.id && frame.includes('"state":"idle"');
    // Re-binding the first session fails once (its store cannot take the frame that says it is back).
    let failures = 0;
    store.failing = (id, frame) => backToIdle(id, frame) && ++failures === 1;
    const link = stack.gateway.directory.agent('builder')!;
    link.peer.channel.close('UNAVAILABLE', 'test: drop the agent link'); // the agent reconnects by itself
    await waitFor(
      () => stack!.gateway.directory.agent('builder') !== undefined && stack!.gateway.directory.agent('builder') !== link,
      15_000,
      'the agent to come back',
    );
    expect(failures).toBeGreaterThan(0);
    expect(stack.gateway.directory.get(broken.id)?.ended ?? true).toBe(true);
    const again = await stack.client('ws', 'alice');
    await turnWorks(await again.attach(other.id), 'the other session works');

    // A hello whose binding fails outright (the session cannot be re-bound, nor ended) is refused, and nothing of it stays listed.
    let refusedHellos = 0;
    store.failing = (id, frame) =>
      id === other.id && (frame.includes('"state":"idle"') || frame.includes('"state":"ended"')) && ++refusedHellos > 0;
    const current = stack.gateway.directory.agent('builder')!;
    current.peer.channel.close('UNAVAILABLE', 'test: drop the agent link again');
    await waitFor(() => refusedHellos > 0, 15_000, 'the agent to try its hello');
    expect(stack.gateway.directory.agent('builder')).toBeUndefined();
    store.failing = undefined; // the disk is back
    await waitFor(
      () => stack!.gateway.directory.agent('builder') !== undefined,
      15_000,
      'the agent to register once the gateway can take it',
    );
  }, 60_000);
});

describe('a session whose engine failed to start', () => {
  it('is not kept in the store and does not come back after a restart', async () => {
    stack = await startRestartable({ agentOptions: { engine: 'auto', engineCommand: '/bin/false' } });
    const alice = await stack.client('ws', 'alice');
    expect(await codeOf(alice.createSession({ agent: 'builder', engine: 'claude' }))).toBe('FAILED_PRECONDITION');
    expect(readdirSync(stack.state)).toEqual([]);
    expect(await alice.listSessions()).toEqual([]);
    const good = await alice.createSession({ agent: 'builder', engine: 'demo' });
    await stack.restart();
    const after = await stack.client('ws', 'alice');
    expect((await after.listSessions()).map((s) => s.id)).toEqual([good.id]);
  }, 60_000);
});
