import { describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { SessionItem } from '../client/remote-session.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { FileSessionStore } from '../gateway/session/session-store.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { processesIn, startTether } from './support/cli.js';
import { isEngineItem, isResult, numberAt, until } from './support/items.js';
import { waitFor } from './support/wait.js';
import { fileURLToPath } from 'node:url';
import { cleanupsPerTest } from './support/cleanups.js';

const BURST_ENGINE = fileURLToPath(new URL('./support/burst-engine.mjs', import.meta.url));

const FAST_BACKOFF = { initialMs: 100, factor: 1.5, maxMs: 400, jitter: 0.2 };

/** The gateway goes away mid-turn and comes back: sessions, history and clients survive. */
describe('gateway restart', () => {
  const cleanups = cleanupsPerTest();

  it('a session, its history and its clients come back; the engine is never restarted', async () => {
    const state: TempDir = makeTempDir('tether-state-');
    const cwd: TempDir = makeTempDir('tether-cwd-');
    cleanups.push(
      () => state.cleanup(),
      () => cwd.cleanup(),
    );
    const boot = (port: number) => startGatewayServer(new Gateway({ store: new FileSessionStore(state.path) }), { port });
    let server: GatewayServer = await boot(0);
    const port = server.port;
    cleanups.push(() => server.close());
    const agentStates: string[] = [];
    const agent = new Agent({
      gateway: server.url,
      name: 'builder',
      engine: 'demo',
      cwd: cwd.path,
      backoff: FAST_BACKOFF,
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
      onStatus: (s) => agentStates.push(s.state),
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const client = await GatewayClient.connect({ gateway: server.url, backoff: FAST_BACKOFF });
    cleanups.push(() => client.close());

    const session = await client.createSession({ agent: 'builder', options: { include_partial_messages: true } });
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('first turn');
    await until(it, isResult, seen);
    const [enginePid] = processesIn(cwd.path, 'demo-engine/main.js');
    expect(enginePid).toBeGreaterThan(0);

    await session.sendUserMessage('a slow long answer please');
    await until(it, (i) => i.kind === 'engine' && i.message.type === 'stream_event', seen);
    await server.close(); // the gateway goes away mid-stream
    // The agent has seen its link go down; the engine keeps streaming into its buffer meanwhile.
    await waitFor(() => agentStates.includes('down'), 10_000, 'the agent to see the gateway gone');
    server = await boot(port);

    const result = (await until(it, isResult, seen, 20_000, 'the slow turn to finish after the restart')) as {
      message: Record<string, unknown>;
    };
    expect(result.message.is_error).toBe(false);
    expect(String(result.message.result)).toContain('39.');
    const seqs = seen.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);
    seqs.forEach((s, n) => expect(s).toBe(n + 1));
    const deltas = seen.filter(
      (i) =>
        i.kind === 'engine' && i.message.type === 'stream_event' && (i.message.event as { type?: string }).type === 'content_block_delta',
    );
    expect(deltas.length).toBe(40 + 5); // 40 slow chunks + the first turn's 5
    expect(processesIn(cwd.path, 'demo-engine/main.js')).toEqual([enginePid]);

    // A newcomer gets the whole history, from the store, with the same seqs.
    const late = await GatewayClient.connect({ gateway: server.url });
    cleanups.push(() => late.close());
    const again = await late.attach(session.id);
    const got: SessionItem[] = [];
    const li = again[Symbol.asyncIterator]();
    await until(li, isResult, got);
    await until(li, isResult, got);
    expect(got[0]).toMatchObject({ seq: 1 });
    await session.sendUserMessage('after the restart');
    const last = (await until(it, isResult, seen)) as { message: Record<string, unknown> };
    expect(String(last.message.result)).toContain('after the restart');
  });

  it('without a store, a restarted gateway stops the engines it no longer knows', async () => {
    const cwd: TempDir = makeTempDir('tether-cwd-');
    cleanups.push(() => cwd.cleanup());
    let server: GatewayServer = await startGatewayServer(new Gateway(), { port: 0 });
    const port = server.port;
    cleanups.push(() => server.close());
    const agent = new Agent({
      gateway: server.url,
      name: 'builder',
      engine: 'demo',
      cwd: cwd.path,
      backoff: FAST_BACKOFF,
      eofGraceMs: 500,
      termGraceMs: 500,
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const client = await GatewayClient.connect({ gateway: server.url, reconnect: false });
    cleanups.push(() => client.close());
    const session = await client.createSession({ agent: 'builder' });
    expect(processesIn(cwd.path, 'demo-engine/main.js')).toHaveLength(1);
    await server.close();
    server = await startGatewayServer(new Gateway(), { port });
    await waitFor(() => processesIn(cwd.path, 'demo-engine/main.js').length === 0, 15_000, 'the unknown engine to be stopped');
    const again = await GatewayClient.connect({ gateway: server.url });
    cleanups.push(() => again.close());
    await expect(again.attach(session.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await waitFor(() => agent.sessionCount === 0, 15_000, 'the agent to forget the session');
  });

  it('the gateway process is SIGKILLed mid-turn and started again: nothing lost, nothing doubled, engine untouched', async () => {
    const state: TempDir = makeTempDir('tether-state-');
    const cwd: TempDir = makeTempDir('tether-cwd-');
    cleanups.push(
      () => state.cleanup(),
      () => cwd.cleanup(),
    );
    const args = (port: string) => ['gateway', '--port', port, '--grpc-port', '0', '--state-dir', state.path, '--auth', 'off'];
    let gw = startTether(args('0'));
    cleanups.push(async () => void (await gw.stop('SIGKILL')));
    const url = (await gw.line('gateway: ')).slice('gateway: '.length);
    const port = new URL(url).port;
    const agent = new Agent({
      gateway: url,
      name: 'builder',
      engine: 'demo',
      cwd: cwd.path,
      backoff: FAST_BACKOFF,
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const client = await GatewayClient.connect({ gateway: url, backoff: FAST_BACKOFF });
    cleanups.push(() => client.close());
    const session = await client.createSession({ agent: 'builder', options: { include_partial_messages: true } });
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('a slow long answer please');
    for (let n = 0; n < 3; n++)
      await until(
        it,
        (i) =>
          i.kind === 'engine' && i.message.type === 'stream_event' && (i.message.event as { type?: string }).type === 'content_block_delta',
        seen,
      );
    const [enginePid] = processesIn(cwd.path, 'demo-engine/main.js');
    expect((await gw.stop('SIGKILL')).signal).toBe('SIGKILL');
    gw = startTether(args(port));
    await gw.line('gateway: ');
    const result = (await until(it, isResult, seen, 30_000, 'the turn to finish after the kill')) as { message: Record<string, unknown> };
    expect(String(result.message.result)).toContain('39.');
    const seqs = seen.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);
    seqs.forEach((s, n) => expect(s).toBe(n + 1));
    const deltas = seen.filter(
      (i) =>
        i.kind === 'engine' && i.message.type === 'stream_event' && (i.message.event as { type?: string }).type === 'content_block_delta',
    );
    expect(deltas).toHaveLength(40);
    expect(processesIn(cwd.path, 'demo-engine/main.js')).toEqual([enginePid]);
  });

  it('a SIGKILL during a burst of 10,000 frames loses nothing the agent had let go of (group commit flushed before every ack)', async () => {
    const state: TempDir = makeTempDir('tether-state-');
    cleanups.push(() => state.cleanup());
    const args = (port: string) => ['gateway', '--port', port, '--grpc-port', '0', '--state-dir', state.path, '--auth', 'off'];
    let gw = startTether(args('0'));
    cleanups.push(async () => void (await gw.stop('SIGKILL')));
    const url = (await gw.line('gateway: ')).slice('gateway: '.length);
    const port = new URL(url).port;
    const agent = new Agent({
      gateway: url,
      name: 'builder',
      engine: 'claude',
      engineCommand: BURST_ENGINE,
      backoff: FAST_BACKOFF,
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const client = await GatewayClient.connect({ gateway: url, backoff: FAST_BACKOFF });
    cleanups.push(() => client.close());
    const session = await client.createSession({ agent: 'builder' });
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('burst 10000');
    const isBurst = (i: SessionItem) => i.kind === 'engine' && i.message.type === 'assistant';
    for (let n = 0; n < 1500; n++) await until(it, isBurst, seen, 30_000, 'the burst to be under way');
    expect((await gw.stop('SIGKILL')).signal).toBe('SIGKILL');
    gw = startTether(args(port));
    await gw.line('gateway: ');
    await until(it, isResult, seen, 60_000, 'the burst to finish after the kill');
    const bursts = seen.filter(isEngineItem).filter(isBurst);
    const numbers = bursts.map((i) => numberAt(i.message, 'n'));
    const dup = numbers.filter((v, n) => numbers.indexOf(v) !== n);
    expect(
      dup,
      `repeated: ${dup.slice(0, 10).join(',')}; seqs of repeats ${bursts
        .filter((i) => dup.includes(numberAt(i.message, 'n')))
        .map((i) => i.seq)
        .join(',')}`,
    ).toEqual([]);
    expect(numbers.length).toBe(10_000);
    // What the client had not yet read when the gateway died came from the restarted gateway's
    // store, or from the agent, which re-sends only what was never acknowledged: no hole means
    // no ack ever outran the store.
    numbers.forEach((v, n) => v !== n && expect(v, `frame ${n}`).toBe(n));
    const seqs = seen.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);
    seqs.forEach((v, n) => v !== n + 1 && expect(v, `seq at ${n}`).toBe(n + 1));
  }, 120_000);
});
