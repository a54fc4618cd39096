/**
 * Session start, stop and attach across link loss (issue 14): a create for an agent whose link
 * dropped waits for it; a create is idempotent under its create_id; an agent whose link drops
 * while its engine spawns reports that engine and it is bound (one engine, never two, never an
 * orphan); stop and attach in flight across a cut complete exactly once. Engines are counted
 * by pid (test/support/counting-engine.ts).
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { demoEnginePath } from '../agent/engine-command.js';
import type { CreateProgress } from '../core/protocol/methods.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { runTether, TETHER_CLAUDE_BIN } from './support/cli.js';
import { isResult, until, rejectionOf } from './support/items.js';
import { withTimeout } from './support/stack.js';
import { startRig, type StartRig, type StartRigOptions } from './support/start-rig.js';
import { waitFor } from './support/wait.js';

const DEMO = [process.execPath, demoEnginePath()];

/** Sends one prompt and waits for its result; returns every item seen. */
async function turn(s: RemoteSession, prompt: string, seen: SessionItem[] = []): Promise<SessionItem[]> {
  await s.sendUserMessage(prompt);
  await until(s[Symbol.asyncIterator](), isResult, seen, 15_000, `the result of "${prompt}"`);
  return seen;
}

describe('session start, stop and attach across link loss', () => {
  let rig: StartRig | undefined;
  const open = async (o: Partial<StartRigOptions> = {}) => (rig = await startRig({ transport: 'ws', engineArgv: DEMO, ...o }));
  afterEach(async () => {
    await rig?.stop();
    rig = undefined;
  });

  /** Drops the agent's link and keeps it down until `back()`. */
  const agentAway = async (r: StartRig) => {
    r.agentProxy.refuse(true);
    r.agentProxy.cutAll();
    await waitFor(() => r.stack.gateway.directory.agent(r.agentName) === undefined, 5_000, 'the gateway to see the agent gone');
    return { back: () => r.agentProxy.refuse(false) };
  };

  for (const transport of ['ws', 'grpc'] as const) {
    it(`${transport}: a create for an agent whose link dropped waits for it, says so, then succeeds with one engine`, async () => {
      const r = await open({ transport });
      const client = await r.client();
      expect((await rejectionOf(client.createSession({ agent: 'nobody-knows-me' }))).code).toBe('NOT_FOUND'); // unknown agents still fail at once
      const away = await agentAway(r);
      const progress: CreateProgress[] = [];
      const creating = client.createSession({ agent: r.agentName, onProgress: (p) => progress.push(p) });
      await waitFor(() => progress.length > 0, 5_000, 'the create to say it waits');
      expect(progress[0]).toMatchObject({ status: 'waiting_for_agent', agent: r.agentName });
      expect(progress[0].message).toContain(`waiting for agent "${r.agentName}"`);
      expect(r.engine.pids()).toEqual([]);
      away.back();
      const s = await withTimeout(creating, 10_000, 'the create to finish once the agent is back');
      expect(s.id).toBe(progress[0].session_id);
      await turn(s, 'hello after the wait');
      expect(r.engine.pids()).toHaveLength(1);
      await s.stop();
      await waitFor(() => r.engine.alive().length === 0, 5_000, 'no engine left');
    }, 30_000);

    it(`${transport}: the agent's link cut while its engine spawns: the engine it reports is bound, one engine, never two`, async () => {
      const r = await open({ transport, delayS: 0.8 });
      const client = await r.client();
      for (const downMs of [0, 1_500]) {
        const before = r.engine.pids().length;
        const creating = client.createSession({ agent: r.agentName });
        await waitFor(() => r.engine.pids().length === before + 1, 5_000, 'the engine to be starting');
        // Cut while it starts; with downMs the agent stays away until the engine is up.
        r.agentProxy.refuse(downMs > 0);
        r.agentProxy.cutAll();
        if (downMs) setTimeout(() => r.agentProxy.refuse(false), downMs);
        const s = await withTimeout(creating, 15_000, 'the create to bind the reported engine');
        await turn(s, `hello after a cut mid-spawn (${downMs} ms down)`);
        expect(r.engine.pids()).toHaveLength(before + 1);
        expect(r.engine.alive()).toHaveLength(before + 1);
      }
      const sessions = r.stack.gateway.directory.sessionList().filter((x) => x.agent === r.agentName);
      expect(sessions.map((x) => x.currentState)).toEqual(['idle', 'idle']);
      expect(r.agent.sessionCount).toBe(2);
    }, 40_000);
  }

  it('an engine the gateway no longer wants (its create gave up while the agent was away) is stopped when the agent reports it', async () => {
    const r = await open({ delayS: 0.8, limits: { agentWaitMs: 500 } });
    const client = await r.client();
    const peer = await client.peer();
    // The raw request: the library would retry the create, the gateway alone gives up.
    const creating = peer.request('session.create', { agent: r.agentName, options: {} }, { timeoutMs: 10_000 });
    await waitFor(() => r.engine.pids().length === 1, 5_000, 'the engine to be starting');
    r.agentProxy.refuse(true);
    r.agentProxy.cutAll();
    const e = await rejectionOf(creating);
    expect(e.code).toBe('UNAVAILABLE');
    expect(e.message).toContain('did not come back');
    expect(r.engine.alive()).toHaveLength(1); // still starting on the agent, unreachable
    r.agentProxy.refuse(false);
    await waitFor(() => r.engine.alive().length === 0, 10_000, 'the unwanted engine to be stopped');
    await waitFor(() => r.agent.sessionCount === 0, 5_000, 'the agent to let the session go');
    expect(r.stack.gateway.directory.sessionList().filter((x) => !x.ended)).toEqual([]);
  }, 30_000);

  it('a create retried under the same create_id gets the same session and one engine, also when the answer was cut off', async () => {
    const r = await open();
    const [c1, c2] = [await r.client(), await r.client()];
    const createId = randomUUID();
    const [a, b] = await Promise.all([
      c1.createSession({ agent: r.agentName, createId }),
      c2.createSession({ agent: r.agentName, createId }),
    ]);
    expect(b.id).toBe(a.id);
    expect((await c2.createSession({ agent: r.agentName, createId })).id).toBe(a.id);
    expect(r.engine.pids()).toHaveLength(1);
    expect((await rejectionOf(c1.createSession({ agent: 'another-agent', createId }))).code).toBe('INVALID_ARGUMENT');
    // Another principal's create_id is its own.
    const other = await r.stack.client({ sub: 'someone-else' });
    expect((await other.createSession({ agent: r.agentName, createId })).id).not.toBe(a.id);
    expect(r.engine.pids()).toHaveLength(2);

    // The answer never reaches the client: its link is cut once the gateway has bound the engine.
    const proxied = await r.proxiedClient();
    r.clientProxy.stall('down');
    const known = new Set(r.stack.gateway.directory.sessionList().map((s) => s.id));
    const creating = proxied.createSession({ agent: r.agentName });
    const fresh = () => r.stack.gateway.directory.sessionList().find((x) => !known.has(x.id));
    await waitFor(() => fresh()?.currentState === 'idle', 10_000, 'the gateway to start the session');
    r.clientProxy.cutAll();
    r.clientProxy.resume('down');
    const s = await withTimeout(creating, 10_000, 'the retried create');
    expect(s.id).toBe(fresh()!.id);
    expect(r.engine.pids()).toHaveLength(3);
    const seen = await turn(s, 'hello after a cut create');
    const seqs = seen.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(
      fresh()!
        .info()
        .clients.map((c) => c.role),
    ).toEqual(['owner']); // the cut-off attempt left no attachment behind
  }, 30_000);

  it('a create without create_id whose client left before the answer does not leave its engine running', async () => {
    const r = await open({ delayS: 0.8 });
    const peer = await (await r.proxiedClient()).peer();
    // The raw request without create_id (what an older client sends): nobody can ask for it again.
    const creating = peer.request('session.create', { agent: r.agentName, options: {} }).catch((err: Error) => err);
    await waitFor(() => r.engine.pids().length === 1, 5_000, 'the engine to be starting');
    r.clientProxy.cutAll();
    expect(await creating).toBeInstanceOf(Error);
    await waitFor(() => r.engine.alive().length === 0, 10_000, 'the engine nobody can reach to be stopped');
    await waitFor(() => r.stack.gateway.directory.sessionList().every((x) => x.ended), 5_000, 'its session to end');
  }, 20_000);

  it('tether run, tether chat --json and the SDK drop-in (tether-claude) say they wait for the agent, then run once it is back', async () => {
    const r = await open();
    const env = { TETHER_GATEWAY: r.stack.wsUrl, TETHER_TOKEN: r.stack.token, TETHER_AGENT: r.agentName, TETHER_CWD: r.cwd };
    const prompt =
      JSON.stringify({ type: 'user', message: { role: 'user', content: 'hello' }, parent_tool_use_id: null, session_id: '' }) + '\n';
    const cases = [
      { args: ['run', '--json', 'hello'], waiting: `* waiting for agent "${r.agentName}" to come back` },
      { args: ['chat', '--json'], input: prompt, waiting: `* waiting for agent "${r.agentName}" to come back` },
      {
        args: ['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json'],
        input: prompt,
        bin: TETHER_CLAUDE_BIN,
        waiting: `tether-claude: waiting for agent "${r.agentName}" to come back`,
      },
    ];
    for (const c of cases) {
      const away = await agentAway(r);
      const before = r.stack.gateway.directory.sessionList().length;
      const running = runTether(c.args, { env, input: c.input, bin: c.bin, timeoutMs: 20_000 });
      await waitFor(() => r.stack.gateway.directory.sessionList().length > before, 10_000, `${c.args[0]}'s create to reach the gateway`);
      away.back();
      const out = await running;
      expect(out.stderr).toContain(c.waiting);
      expect(out.code, out.stderr).toBe(0);
      expect(out.stdout).toContain('"type":"result"');
    }
    await waitFor(() => r.engine.alive().length === 0, 10_000, 'every engine stopped');
    expect(r.engine.pids()).toHaveLength(cases.length);
  }, 60_000);

  it('a first connection lost before its hello is tried again: tether chat on a flaky link still starts', async () => {
    const r = await open();
    const gw = r.stack.gateway;
    const accept = gw.accept.bind(gw);
    let dropped = 0;
    gw.accept = (channel, principal) => {
      if (dropped < 2) {
        dropped++;
        channel.close('UNAVAILABLE', 'a flaky link drops it');
        return;
      }
      accept(channel, principal);
    };
    const prompt = JSON.stringify({ type: 'user', message: { role: 'user', content: 'hello' } }) + '\n';
    const out = await runTether(['chat', '--agent', r.agentName, '--json'], {
      env: { TETHER_GATEWAY: r.stack.wsUrl, TETHER_TOKEN: r.stack.token },
      input: prompt,
      timeoutMs: 20_000,
    });
    expect(out.code, out.stderr).toBe(0);
    expect(dropped).toBe(2);
    expect(out.stdout).toContain('"type":"result"');
  }, 30_000);

  for (const transport of ['ws', 'grpc'] as const) {
    it(`${transport}: a stop in flight when the agent link drops completes once the agent is back; one sent as the client link drops completes after its reconnect`, async () => {
      const r = await open({ transport });
      const client = await r.client();
      const s = await client.createSession({ agent: r.agentName });
      await turn(s, 'hello');
      const away = await agentAway(r);
      const stopping = s.stop();
      await waitFor(
        () => r.stack.gateway.directory.waits.waiting(r.agentName) === 1,
        5_000,
        'the stop to wait for the agent at the gateway',
      );
      expect(r.engine.alive()).toHaveLength(1);
      away.back();
      await withTimeout(stopping, 10_000, 'the stop to complete after the agent came back');
      expect(r.engine.alive()).toEqual([]);
      expect(r.stack.gateway.directory.get(s.id)?.ended).toBe(true);

      const proxied = await r.proxiedClient();
      const s2 = await proxied.createSession({ agent: r.agentName });
      r.clientProxy.stall('down');
      const stopping2 = s2.stop();
      await waitFor(() => r.stack.gateway.directory.get(s2.id)?.ended === true, 10_000, 'the engine to be stopped');
      r.clientProxy.cutAll();
      r.clientProxy.resume('down');
      await withTimeout(stopping2, 10_000, 'the stop to be answered after the reconnect');
      expect(r.engine.pids()).toHaveLength(2);
      expect(r.engine.alive()).toEqual([]);
    }, 40_000);

    it(`${transport}: an attach in flight when the client link drops completes once after the reconnect: one attachment, history once`, async () => {
      const r = await open({ transport });
      const owner = await r.client();
      const s = await owner.createSession({ agent: r.agentName });
      await turn(s, 'first');
      const proxied = await r.proxiedClient();
      r.clientProxy.stall('down');
      const session = () => r.stack.gateway.directory.get(s.id)!;
      const attaching = proxied.attach(s.id);
      await waitFor(() => session().info().clients.length === 2, 5_000, 'the attach to reach the gateway');
      r.clientProxy.cutAll();
      r.clientProxy.resume('down');
      const joined = await withTimeout(attaching, 10_000, 'the attach to complete after the reconnect');
      await waitFor(() => session().info().clients.length === 2, 5_000, 'the cut attachment to be gone');
      expect(
        session()
          .info()
          .clients.map((c) => c.client_id),
      ).toContain(joined.clientId);
      const seen: SessionItem[] = [];
      await s.sendUserMessage('second');
      const it2 = joined[Symbol.asyncIterator]();
      await until(it2, isResult, seen, 15_000, 'the first result (history)');
      await until(it2, isResult, seen, 15_000, 'the second result (live)');
      const seqs = seen.filter((i) => i.kind !== 'reply' && (i as { seq: number }).seq > 0).map((i) => (i as { seq: number }).seq);
      expect(seqs[0]).toBe(1);
      seqs.forEach((q, n) => expect(q).toBe(n + 1)); // whole history, nothing twice, nothing missing
    }, 30_000);
  }
});
