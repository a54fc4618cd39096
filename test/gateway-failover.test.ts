import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { AGENT_CONFIG } from '../agent/config.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { SessionItem } from '../client/remote-session.js';
import { loadConfig } from '../core/config/load.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer } from '../gateway/server.js';
import { standardDialers } from '../core/link/dial.js';
import { gatewayUrls } from '../core/link/gateway-urls.js';
import type { LinkStatus } from '../core/link/link.js';
import { processesIn, runTether, startTether, TETHER_BIN } from './support/cli.js';
import { reservePort, startFailoverPair } from './support/failover-pair.js';
import { isResult, until } from './support/items.js';
import { FAST_BACKOFF } from './support/restartable-stack.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { waitFor, withTimeout } from './support/wait.js';
import { hasTool } from './support/tools.js';

const isDelta = (i: SessionItem) =>
  i.kind === 'engine' && i.message.type === 'stream_event' && (i.message.event as { type?: string }).type === 'content_block_delta';
const connectedUrls = (statuses: LinkStatus[]) => statuses.flatMap((s) => (s.state === 'connected' ? [s.url] : []));

/**
 * Losing a gateway without NATS: gateway A is SIGKILLed and gateway B starts on the same
 * file store. Agents and clients given both URLs move to B by themselves.
 */
describe.skipIf(!hasTool('nats-server'))('gateway fail-over (a list of gateway URLs)', () => {
  const cleanups = cleanupsPerTest({ tolerant: true });
  const figures: string[] = [];
  afterAll(() => figures.length && console.log(`gateway fail-over figures:\n${figures.join('\n')}`));

  for (const t of ['ws', 'grpc'] as const) {
    it(`${t}: gateway A is SIGKILLed mid-turn; the agent moves to B with the same engine; a client resumes on B with nothing lost or doubled`, async () => {
      const pair = await startFailoverPair();
      cleanups.push(() => pair.stop());
      const cwd = cleanups.tempDir('tether-cwd-');
      const [a, b] = pair.urls(t);
      const agentStatus: LinkStatus[] = [];
      const agent = new Agent({
        gateway: [a, b],
        name: 'builder',
        engine: 'demo',
        cwd: cwd.path,
        backoff: FAST_BACKOFF,
        eofGraceMs: 1_000,
        termGraceMs: 1_000,
        onStatus: (s) => agentStatus.push(s),
      });
      await agent.start();
      cleanups.push(() => agent.shutdown(1_000));
      const clientStatus: { at: number; status: LinkStatus }[] = [];
      const client = await GatewayClient.connect({
        gateway: [a, b],
        backoff: FAST_BACKOFF,
        onStatus: (status) => clientStatus.push({ at: Date.now(), status }),
      });
      cleanups.push(() => client.close());
      expect(connectedUrls(agentStatus)).toEqual([a]);

      const session = await client.createSession({ agent: 'builder', options: { include_partial_messages: true } });
      const it = session[Symbol.asyncIterator]();
      const seen: SessionItem[] = [];
      await session.sendUserMessage('a slow long answer please');
      for (let n = 0; n < 3; n++) await until(it, isDelta, seen);
      const [enginePid] = processesIn(cwd.path, 'demo-engine/main.js');
      expect(enginePid).toBeGreaterThan(0);

      const killedAt = Date.now();
      await pair.killA();
      await pair.startB();
      const bListeningAt = Date.now();
      const result = (await until(it, isResult, seen, 30_000, 'the turn to finish on gateway B')) as { message: Record<string, unknown> };
      expect(String(result.message.result)).toContain('39.');
      const seqs = seen.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);
      seqs.forEach((s, n) => expect(s, `item ${n}`).toBe(n + 1)); // none lost, none doubled
      expect(seen.filter(isDelta)).toHaveLength(40);
      expect(processesIn(cwd.path, 'demo-engine/main.js')).toEqual([enginePid]); // the engine was never restarted

      // Both moved to B, each after at least one failed attempt on A. A link reports its state
      // after the hooks it runs on connecting, so the frames may be read first: wait for it.
      const onB = () =>
        connectedUrls(agentStatus).includes(b) && clientStatus.some((s) => s.status.state === 'connected' && s.status.url === b);
      await waitFor(onB, 5_000, () => `agent and client to report B (agent: ${connectedUrls(agentStatus).join(' ')})`);
      expect(connectedUrls(agentStatus)).toEqual([a, b]);
      expect(agentStatus.some((s) => s.state === 'down' && s.url === a && s.nextUrl === b)).toBe(true);
      const resumed = clientStatus.find((s) => s.status.state === 'connected' && s.status.url === b);
      expect(resumed, 'the client resumed on B').toBeDefined();
      figures.push(
        `${t}: client resumed on B ${resumed!.at - killedAt} ms after A was SIGKILLed, ${resumed!.at - bListeningAt} ms after B listened; ${seqs.length} frames, 0 lost, 0 doubled`,
      );

      // B is the session's home now: it lists it, and the session takes a new turn there.
      expect((await client.listSessions()).map((s) => [s.id, s.agent])).toEqual([[session.id, 'builder']]);
      await session.sendUserMessage('after the fail-over');
      const last = (await until(it, isResult, seen)) as { message: Record<string, unknown> };
      expect(String(last.message.result)).toContain('after the fail-over');
      expect(processesIn(cwd.path, 'demo-engine/main.js')).toEqual([enginePid]);
    }, 60_000);
  }

  it('tether agent --gateway A,B and tether chat --json --gateway A --gateway B ride through the fail-over: same engine, every frame once', async () => {
    const pair = await startFailoverPair();
    cleanups.push(() => pair.stop());
    const cwd = cleanups.tempDir('tether-cwd-');
    const [a, b] = pair.urls('ws');
    const [agentA, agentB] = pair.urls('grpc');
    const agent = startTether([
      'agent',
      '--gateway',
      `${agentA},${agentB}`,
      '--name',
      'builder',
      '--engine',
      'demo',
      '--cwd',
      cwd.path,
      '--host-key-file',
      'off',
    ]);
    cleanups.push(() => agent.stop());
    await waitFor(
      () => agent.stderr().includes(`agent builder: connected to `),
      15_000,
      () => `the agent to register: ${agent.stderr()}`,
    );
    expect(agent.stderr()).toContain(` at ${agentA}\n`);
    const chat = spawn(process.execPath, [TETHER_BIN, 'chat', '--json', '--agent', 'builder', '--gateway', a, '--gateway', b], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => chat.on('exit', (code) => resolve(code)));
    cleanups.push(() => chat.exitCode === null && chat.kill('SIGKILL'));
    let stderr = '';
    chat.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const lines: Record<string, unknown>[] = [];
    createInterface({ input: chat.stdout }).on('line', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    const of = (type: string, subtype?: string) => lines.filter((l) => l.type === type && (subtype === undefined || l.subtype === subtype));
    const why = () => `\nstdout:\n${lines.map((l) => JSON.stringify(l).slice(0, 160)).join('\n')}\nstderr: ${stderr}`;
    const prompt = async (text: string, n: number, beforeResult?: () => Promise<void>) => {
      chat.stdin.write(JSON.stringify({ type: 'user', message: { role: 'user', content: text } }) + '\n');
      await waitFor(
        () => of('tether', 'prompt').length === n,
        20_000,
        () => `prompt ${n} to be accepted${why()}`,
      );
      await beforeResult?.();
      await waitFor(
        () => of('result').length === n,
        30_000,
        () => `result ${n}${why()}`,
      );
    };

    await prompt('first turn', 1);
    const [enginePid] = processesIn(cwd.path, 'demo-engine/main.js');
    // The slow turn streams for ~2 s on the engine: gateway A dies under it, B takes over.
    await prompt('a slow long answer please', 2, async () => {
      await pair.killA();
      await pair.startB();
    });
    await prompt('after the fail-over', 3);
    expect(processesIn(cwd.path, 'demo-engine/main.js')).toEqual([enginePid]);
    // The agent said where it went: A failed, B next, registered at B.
    expect(agent.stderr()).toMatch(new RegExp(`agent builder: link down \\(${agentA}: .*\\); retrying ${agentB} in \\d+ ms\n`));
    expect(agent.stderr()).toMatch(new RegExp(`agent builder: connected to gw-\\S+ at ${agentB}\n`));
    chat.stdin.end();
    expect(await withTimeout(exited, 20_000, 'tether chat to exit after stdin EOF')).toBe(0);
    // Every frame once, in order: three prompts, three answers, three results, one init per turn.
    expect(of('tether', 'prompt').map((l) => (l.message as { content: string }).content)).toEqual([
      'first turn',
      'a slow long answer please',
      'after the fail-over',
    ]);
    const answers = of('assistant').map((l) => JSON.stringify(l.message));
    expect(answers).toHaveLength(3);
    expect(answers[1]).toContain('39.');
    expect(answers[2]).toContain('after the fail-over');
    expect(of('result')).toHaveLength(3);
    expect(new Set(of('system', 'init').map((l) => l.uuid)).size).toBe(of('system', 'init').length);
    expect(processesIn(cwd.path, 'demo-engine/main.js')).toHaveLength(0); // stdin EOF stopped the one engine
    // The link events name the gateway that failed and the one the client resumed on.
    const link = of('tether', 'link').map((l) => `${String(l.status)}: ${String(l.message)}`);
    expect(link[0]).toMatch(new RegExp(`^down: link down \\(${a}: .*\\); retrying ${b} in \\d+ ms$`));
    expect(link).toContain(`connected: link up (${b})`);
  }, 90_000);

  it('a bad URL in the list is named, before anything is dialed', async () => {
    let accepted = 0;
    const server = createServer((s: Socket) => {
      accepted++;
      s.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    const good = `ws://127.0.0.1:${(server.address() as { port: number }).port}`;

    await expect(GatewayClient.connect({ gateway: [good, 'http://gw:7800'] })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('gateway URL 2 of 2: unsupported gateway URL scheme "http:" in "http://gw:7800"'),
    });
    await expect(GatewayClient.connect({ gateway: `${good},not a url` })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('"not a url"'),
    });
    await expect(GatewayClient.connect({ gateway: ' , ' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('no gateway URL given'),
    });
    const agent = new Agent({ gateway: [good, 'grpc//gw:7801'], name: 'builder', engine: 'demo' });
    await expect(agent.start()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('"grpc//gw:7801"') });
    expect(accepted).toBe(0);

    // The agent's configuration names it too, with where it came from.
    const problems = (flags: Record<string, unknown>) => {
      try {
        loadConfig(AGENT_CONFIG, { flags, env: {} });
        return [];
      } catch (err) {
        return (err as { problems: string[] }).problems;
      }
    };
    expect(problems({ gateway: ['ws://gw:7800', 'http://gw2:7800'] })).toEqual([
      'gateway (from --gateway): must be a ws://, wss://, grpc:// or grpcs:// URL, got "http://gw2:7800"',
    ]);
    // The CLI: exit 2 and the message, nothing dialed.
    const r = await runTether(['sessions', '--gateway', good, '--gateway', 'http://gw:7800']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('gateway URL 2 of 2');
    expect(accepted).toBe(0);
  });

  it('the agent and the CLI take the list as a repeated flag, commas, or a config-file list; one URL stays a string', () => {
    const load = (flags: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => loadConfig(AGENT_CONFIG, { flags, env }).config.gateway;
    expect(load({ gateway: ['ws://gw:7800'] })).toBe('ws://gw:7800');
    expect(gatewayUrls([' ws://a:7800 , ws://a:7800', 'grpc://b:7801,'], standardDialers())).toEqual(['ws://a:7800', 'grpc://b:7801']); // what the link dials: trimmed, once each
    expect(load({ gateway: ['ws://a:7800', 'grpc://b:7801'] })).toEqual(['ws://a:7800', 'grpc://b:7801']);
    expect(load({ gateway: ['ws://a:7800,ws://b:7800'] })).toEqual(['ws://a:7800', 'ws://b:7800']);
    expect(load({}, { TETHER_GATEWAY: 'ws://a:7800, ws://b:7800' })).toEqual(['ws://a:7800', 'ws://b:7800']);
    const file = `${cleanups.tempDir('tether-config-').path}/agent.yaml`;
    writeFileSync(file, 'gateway:\n  - ws://a:7800\n  - ws://b:7800\n');
    expect(load({ config: file })).toEqual(['ws://a:7800', 'ws://b:7800']);
  });

  it('a dead gateway first in the list: a one-shot command uses the next one', async () => {
    const server = await startGatewayServer(new Gateway(), { port: 0, grpcPort: 0 });
    cleanups.push(() => server.close());
    const dead = `grpc://127.0.0.1:${await reservePort()}`;
    const r = await runTether(['sessions', '--gateway', `${dead},${server.url}`, '--json']);
    expect(r.stderr).toBe('');
    expect([r.code, JSON.parse(r.stdout)]).toEqual([0, []]);
  });

  it('every gateway down: the client says which failed and why; the agent keeps retrying with its backoff, visible in its status, and stops cleanly', async () => {
    const urls = [`ws://127.0.0.1:${await reservePort()}`, `grpc://127.0.0.1:${await reservePort()}`];
    const clientStatus: LinkStatus[] = [];
    const err = await GatewayClient.connect({ gateway: urls, backoff: FAST_BACKOFF, onStatus: (s) => clientStatus.push(s) }).catch(
      (e: Error) => e,
    );
    expect(err).toMatchObject({ code: 'UNAVAILABLE' });
    expect((err as Error).message).toMatch(new RegExp(`^all 2 gateways failed: ${urls[0]}: .+; ${urls[1]}: .+`));
    expect(clientStatus.map((s) => s.state)).toEqual(['connecting', 'down', 'connecting', 'closed']);
    expect(clientStatus.filter((s) => s.state === 'connecting').map((s) => (s as { url: string }).url)).toEqual(urls);

    const statuses: LinkStatus[] = [];
    const agent = new Agent({ gateway: urls, name: 'builder', engine: 'demo', backoff: FAST_BACKOFF, onStatus: (s) => statuses.push(s) });
    cleanups.push(() => agent.shutdown(100)); // also when an assertion below fails first
    const started = agent.start();
    const downs = () => statuses.filter((s): s is Extract<LinkStatus, { state: 'down' }> => s.state === 'down');
    await waitFor(() => downs().length >= 4, 10_000, 'two rounds of failed attempts');
    const [first, second, third] = downs();
    expect([first.url, first.nextUrl, second.url, second.nextUrl]).toEqual([urls[0], urls[1], urls[1], urls[0]]);
    expect(first.error.message.startsWith(`${urls[0]}: `)).toBe(true);
    expect(second.error.message).toContain('all 2 gateways failed');
    // The backoff grows once per round of the list: 100 ms ±20 % twice, then 150 ms ±20 %.
    for (const d of [first, second]) expect(d.retryInMs).toBeGreaterThanOrEqual(80), expect(d.retryInMs).toBeLessThanOrEqual(120);
    expect(third.retryInMs).toBeGreaterThanOrEqual(120);
    expect(third.retryInMs).toBeLessThanOrEqual(180);
    await agent.shutdown(100);
    await expect(started).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(statuses.at(-1)).toEqual({ state: 'closed' });
    const after = statuses.length;
    await new Promise((r) => setTimeout(r, 3 * FAST_BACKOFF.maxMs)); // proving an absence: no dial after the stop
    expect(statuses.length).toBe(after);
  });
});
