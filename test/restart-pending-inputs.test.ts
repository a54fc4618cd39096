/**
 * Inputs still waiting for the agent's ack when the gateway goes away (the agent holds its
 * input acks for output to ride on, `acks.folded.v1`): after the restart the gateway has them
 * from its store as unconfirmed, the agent's hello says which it wrote, and each prompt
 * reaches the engine exactly once.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { SessionItem } from '../client/remote-session.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { FileSessionStore } from '../gateway/session/session-store.js';
import { makeTempDir } from './support/claude-cli.js';
import { isResult, until } from './support/items.js';

const QUIET_ENGINE = fileURLToPath(new URL('./support/quiet-engine.mjs', import.meta.url));
const FAST_BACKOFF = { initialMs: 20, factor: 1.5, maxMs: 150, jitter: 0.2 };

describe('a gateway restart with inputs not yet acknowledged', () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
    cleanups.length = 0;
  });

  it('each prompt reaches the engine once: the one the engine had, and the ones after', async () => {
    const state = makeTempDir('tether-state-');
    const cwd = makeTempDir('tether-cwd-');
    cleanups.push(
      () => state.cleanup(),
      () => cwd.cleanup(),
    );
    let gateway: Gateway;
    const boot = (port: number) => {
      gateway = new Gateway({ store: new FileSessionStore(state.path) });
      return startGatewayServer(gateway, { port, auth: { verifier: 'off' } });
    };
    let server: GatewayServer = await boot(0);
    cleanups.push(() => server.close());
    const agent = new Agent({
      gateway: server.url,
      name: 'quiet',
      engine: 'claude',
      engineCommand: QUIET_ENGINE,
      cwd: cwd.path,
      backoff: FAST_BACKOFF,
      eofGraceMs: 1_000,
      termGraceMs: 1_000,
    });
    await agent.start();
    cleanups.push(() => agent.shutdown(1_000));
    const client = await GatewayClient.connect({ gateway: server.url, backoff: FAST_BACKOFF });
    cleanups.push(() => client.close());
    const session = await client.createSession({ agent: 'quiet' });
    const log = join(cwd.path, 'prompts.log');
    const prompts = () => (existsSync(log) ? readFileSync(log, 'utf8') : '');

    expect(await session.sendUserMessage('first')).toBe('applied');
    expect(await session.sendUserMessage('second')).toBe('applied');
    await vi.waitFor(() => expect(prompts()).toBe('first\nsecond\n'), { timeout: 10_000, interval: 5 });
    // The engine has both and said nothing, so the agent's ack has had no output to ride on.
    const unconfirmed = gateway!.directory.get(session.id)?.unconfirmedInputs;
    // The premise: the gateway goes away holding inputs the agent has not confirmed (its lone
    // ack waits INPUT_ACK_DEFER_MS for output that never comes).
    expect(unconfirmed, 'inputs still unconfirmed when the gateway goes away').toBeGreaterThan(0);
    await server.close();
    server = await boot(server.port);

    const items: SessionItem[] = [];
    expect(await session.sendUserMessage('answer')).toBe('applied');
    await until(session[Symbol.asyncIterator](), isResult, items, 20_000, 'the answer after the restart');
    expect(prompts()).toBe('first\nsecond\nanswer\n');
    console.log(`restart-pending-inputs: ${unconfirmed} input(s) unconfirmed when the gateway went away`);
  }, 60_000);
});
