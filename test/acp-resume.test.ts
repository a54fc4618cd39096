import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { GatewayClient } from '../client/gateway-client.js';
import { BIN_DIR } from './support/acp-agents.js';
import { claudeTestEnv } from './support/claude-cli.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { killProcessesIn, startTether, type Daemon } from './support/cli.js';
import { startFakeAnthropic } from './support/fake-anthropic.js';
import { startStack } from './support/stack.js';
import { readTurn } from './support/turns.js';
import { waitFor } from './support/wait.js';

/**
 * Resume for an ACP engine (issue 37): the agent (running Claude Code's ACP adapter, which
 * has `loadSession`) is killed with its engine and started again; the gateway asks for the
 * engine on the session's ACP session id, the engine process answers with `session/load`, and
 * the next prompt reaches the model with the earlier conversation, in the same session.
 */
describe('an ACP engine across an agent restart (claude-code-acp, session/load)', () => {
  const cleanups = cleanupsPerTest();

  it('a prompt sent while the agent is away is answered by the reloaded engine with the earlier conversation', async () => {
    const fake = await startFakeAnthropic({ responses: [{ text: 'Noted: the word is PLUM.' }, { text: 'The word was PLUM.' }] });
    cleanups.push(() => fake.close());
    const stack = await startStack({ engine: 'demo' });
    cleanups.push(() => stack.stop());
    const token = await stack.mint({ kind: 'agent', sub: 'builder', agent: 'builder' });
    const home = cleanups.tempDir('tether-acp-restart-home-');
    const cwd = cleanups.tempDir('tether-acp-restart-cwd-').path;
    let agent: Daemon | undefined;
    // Last in, first out: the agent and the engines it leaves go before the folders.
    cleanups.push(async () => {
      await agent?.stop('SIGKILL', 5_000);
      killProcessesIn(cwd, 'claude');
    });
    const client: GatewayClient = await stack.client();
    const env = {
      ...claudeTestEnv({ home: home.path, baseUrl: fake.url, extra: { IS_SANDBOX: '1' } }),
      PATH: `${BIN_DIR}:${process.env.PATH}`,
      TETHER_TOKEN: token,
      TETHER_LOG_LEVEL: 'warn',
    };
    const startAgent = async () => {
      agent = startTether(['agent', '--gateway', stack.url, '--name', 'builder', '--engine', 'claude-acp', '--cwd', cwd], { env });
      await waitFor(
        async () => (await client.listAgents()).some((a) => a.name === 'builder'),
        45_000,
        () => `agent to register: ${agent?.stderr()}`,
      );
    };
    await startAgent();
    const session = await client.createSession({ agent: 'builder' });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('Remember the word PLUM.');
    const first = await readTurn(session, () => undefined, items, 90_000).catch((e) => {
      throw new Error(`${e.message}\nAGENT: ${agent?.stderr()}`);
    });
    expect(first.result.is_error).toBe(false);
    // The CLI writes its transcript after the turn's answer: a crash before that leaves nothing to
    // load (a reboot would lose that turn too), so the crash comes once the answer is on disk.
    const acpSessionId = String(first.result.session_id);
    const projects = join(home.path, '.claude', 'projects');
    const transcriptHolds = (text: string) =>
      existsSync(projects) &&
      readdirSync(projects).some((d) => {
        const f = join(projects, d, `${acpSessionId}.jsonl`);
        return existsSync(f) && readFileSync(f, 'utf8').includes(text);
      });
    await waitFor(() => transcriptHolds('Noted: the word is PLUM.'), 30_000, 'the transcript to hold the first answer');

    await agent!.stop('SIGKILL', 5_000);
    killProcessesIn(cwd, 'claude'); // as a reboot would: the engine goes with its agent
    await waitFor(
      async () => (await client.listSessions()).find((s) => s.id === session.id)?.state === 'agent-lost',
      15_000,
      'the session to lose its agent',
    );
    await session.sendUserMessage('What was the word?');
    await startAgent();
    const second = await readTurn(session, () => undefined, items, 120_000).catch((e) => {
      throw new Error(`${e.message}\nAGENT: ${agent?.stderr()}`);
    });
    expect(second.result.is_error).toBe(false);
    expect(JSON.stringify(second.messages)).toContain('The word was PLUM.');
    expect(second.items.some((i) => i.kind === 'event' && i.event.subtype === 'engine_resumed')).toBe(true);
    // The reloaded engine sent the earlier conversation with the new prompt; the history replayed by session/load was not shown again.
    const last = fake.modelRequests().filter((r) => JSON.stringify(r.lastMessage ?? '').includes('What was the word?'));
    expect(last).toHaveLength(1);
    expect(last[0]!.raw).toContain('Remember the word PLUM.');
    expect(JSON.stringify(second.messages)).not.toContain('Noted: the word is PLUM.');
  }, 300_000);
});
