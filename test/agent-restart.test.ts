import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import type { GatewayClient } from '../client/gateway-client.js';
import type { TetherEvent } from '../core/protocol/events.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { processesIn, startTether, type Daemon } from './support/cli.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './support/fake-anthropic.js';
import { startStack, type Stack } from './support/stack.js';
import { readTurn } from './support/turns.js';
import { waitFor, withTimeout } from './support/wait.js';

/**
 * Issue 32: a session outlives its agent. `tether agent` runs the real CLI against the scripted
 * model; the test kills the agent with SIGKILL (and, as a machine reboot or systemd's cgroup
 * kill would, its engine), starts it again with the same identity and HOME, and the session
 * goes on: same id, same seqs, the model's next request carries the earlier conversation.
 */
// At once: each test has its own stack, fake model, folders and agent, and its time is the
// real CLI starting and answering (8.8 s CPU of 50-74 s alone).
describe.concurrent('a session across an agent restart (real CLI)', () => {
  /**
   * The test's stack, fake model (scripted by `scenario`) and agent process started with
   * `flags` (again by `startAgent`); everything is stopped when the test finishes.
   */
  async function setUp(
    onTestFinished: (fn: () => Promise<void>) => void,
    scenario: FakeScenario,
    flags: string[] = [],
  ): Promise<{
    client: GatewayClient;
    startAgent: () => Promise<void>;
    /** The agent process started last. */
    agent: () => Daemon;
    fake: FakeAnthropic;
    home: string;
    /** Kills the agent as a crash would, then its orphaned engine; waits until the gateway sees the session without its agent. */
    crash: (client: GatewayClient, sessionId: string) => Promise<void>;
    /** Requests the model got whose last user message contains `text`. */
    asked: (text: string) => ReturnType<FakeAnthropic['modelRequests']>;
  }> {
    const dirs: TempDir[] = [];
    let stack: Stack | undefined;
    let fake: FakeAnthropic | undefined;
    let agent: Daemon | undefined;
    let cwd = '';
    /** The engines started in the session folder: a kill -9 of the agent leaves them orphaned. */
    const killEngines = () => {
      if (!cwd) return;
      for (const pid of processesIn(cwd, 'claude')) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    };
    onTestFinished(async () => {
      await agent?.stop('SIGKILL', 5_000);
      killEngines();
      await stack?.stop();
      await fake?.close();
      for (const d of dirs) d.cleanup();
    });
    fake = await startFakeAnthropic(scenario);
    stack = await startStack({ engine: 'demo' });
    const token = await stack.mint({ kind: 'agent', sub: 'builder', agent: 'builder' });
    const homeDir = makeTempDir('tether-restart-home-');
    const folder = makeTempDir('tether-restart-cwd-');
    dirs.push(homeDir, folder);
    cwd = folder.path;
    const home = homeDir.path;
    const client = await stack.client();
    const startAgent = async () => {
      agent = startTether(
        [
          'agent',
          '--gateway',
          stack!.url,
          '--name',
          'builder',
          '--engine',
          'claude',
          '--engine-command',
          claudeBinaryPath(),
          '--cwd',
          cwd,
          ...flags,
        ],
        {
          env: { ...claudeTestEnv({ home, baseUrl: fake!.url }), TETHER_TOKEN: token, TETHER_LOG_LEVEL: 'warn' },
        },
      );
      await waitFor(
        async () => (await client.listAgents()).some((a) => a.name === 'builder'),
        45_000,
        () => `agent builder to register: ${agent?.stderr()}`,
      );
    };
    await startAgent();
    const crash = async (client: GatewayClient, sessionId: string) => {
      await agent!.stop('SIGKILL', 5_000);
      killEngines();
      await waitFor(
        async () => (await client.listSessions()).find((s) => s.id === sessionId)?.state === 'agent-lost',
        15_000,
        'the session to lose its agent',
      );
    };
    const asked = (text: string) => fake!.modelRequests().filter((r) => JSON.stringify(r.lastMessage ?? '').includes(text));
    return { client, startAgent, agent: () => agent!, fake, home, crash, asked };
  }

  /** Reads items until one satisfies `stop` (included) or the session's stream ends; bounded. */
  function readUntil(
    items: AsyncIterator<SessionItem>,
    stop: (i: SessionItem) => boolean,
    ms: number,
    what: string,
  ): Promise<SessionItem[]> {
    const seen: SessionItem[] = [];
    const run = async () => {
      for (;;) {
        const next = await items.next();
        if (next.done) return seen;
        seen.push(next.value);
        if (stop(next.value)) return seen;
      }
    };
    return withTimeout(run(), ms, what);
  }

  const resumedEvents = (items: SessionItem[]) =>
    items.flatMap((i) =>
      i.kind === 'event' && i.event.subtype === 'engine_resumed' ? [i.event as Extract<TetherEvent, { subtype: 'engine_resumed' }>] : [],
    );

  it('between turns: a prompt sent while the agent is away is queued, then answered by the resumed engine with the earlier conversation', async ({
    onTestFinished,
  }) => {
    const { client, startAgent, crash, asked } = await setUp(onTestFinished, {
      responses: [{ text: 'Noted: the word is PLUM.' }, { text: 'The word was PLUM.' }],
    });
    const session = await client.createSession({ agent: 'builder' });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('Remember the word PLUM.');
    const first = await readTurn(session, () => undefined, items, 60_000);
    expect(first.result.is_error).toBe(false);

    await crash(client, session.id);
    await session.sendUserMessage('What was the word?'); // queued at the gateway while the agent is away
    const away = (await client.listSessions()).find((s) => s.id === session.id)!;
    expect(away.agent_away_since).toBeDefined();
    expect(away.queued_inputs).toBe(1);

    await startAgent();
    const second = await readTurn(session, () => undefined, items, 90_000);
    expect(second.result.is_error).toBe(false);
    expect(JSON.stringify(second.messages)).toContain('The word was PLUM.');
    const [resumed] = resumedEvents(second.items);
    expect(resumed).toMatchObject({ interrupted_turn: false, resent_inputs: 1 });
    // The resumed engine sent the whole conversation, and each prompt reached an engine once.
    const last = asked('What was the word?');
    expect(last).toHaveLength(1);
    expect(last[0].raw).toContain('Remember the word PLUM.');
    expect(last[0].raw).toContain('Noted: the word is PLUM.');
    expect(asked('Remember the word PLUM.')).toHaveLength(1);
    // Same session, numbering unbroken: the seqs the client read rose by one throughout.
    const seqs = [...first.items, ...second.items].flatMap((i) => (i.kind === 'reply' ? [] : [i.seq]));
    expect(seqs.every((s, n) => n === 0 || s === seqs[n - 1] + 1)).toBe(true);
    expect((await client.listSessions()).find((s) => s.id === session.id)).toMatchObject({ state: 'idle' });
  }, 240_000);

  it('mid-turn: the cut turn is reported interrupted, and the next prompt is answered in the same conversation', async ({
    onTestFinished,
  }) => {
    const { client, startAgent, fake, crash, asked } = await setUp(onTestFinished, {
      responses: [
        { text: `Counting: ${'one two three four five '.repeat(40)}`, chunk_delay_ms: 100 },
        { text: 'Picking up where we were.' },
      ],
    });
    const session = await client.createSession({ agent: 'builder' });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('Count slowly to a thousand.');
    await waitFor(() => fake.textDeltasSent() > 2, 60_000, 'the answer to be under way');
    await crash(client, session.id);
    await startAgent();

    const seen = await readUntil(
      items,
      (i) => i.kind === 'event' && i.event.subtype === 'engine_resumed',
      60_000,
      'the engine_resumed event',
    );
    expect(resumedEvents(seen)[0]).toMatchObject({ interrupted_turn: true, resent_inputs: 0 });
    await session.sendUserMessage('Go on.');
    const turn = await readTurn(session, () => undefined, items, 90_000);
    expect(turn.result.is_error).toBe(false);
    const last = asked('Go on.');
    expect(last).toHaveLength(1);
    expect(last[0].raw).toContain('Count slowly to a thousand.');
    expect(asked('Count slowly to a thousand.')).toHaveLength(1); // the cut turn never ran again
  }, 240_000);

  it('a graceful restart (SIGTERM with --drain-ms) lets the running turn finish, and the next agent process resumes the session', async ({
    onTestFinished,
  }) => {
    const { client, startAgent, agent, fake, asked } = await setUp(
      onTestFinished,
      {
        responses: [{ text: `Counting: ${'one two three four five '.repeat(8)}done.`, chunk_delay_ms: 60 }, { text: 'Still here.' }],
      },
      ['--drain-ms', '60000'],
    );
    const session = await client.createSession({ agent: 'builder' });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('Count to five, eight times.');
    const running = readTurn(session, () => undefined, items, 90_000);
    await waitFor(() => fake.textDeltasSent() > 2, 60_000, 'the answer to be under way');
    const exit = await agent().stop('SIGTERM', 60_000); // waits for the turn, then hands the session over
    expect(exit.code).toBe(0);
    const first = await running;
    expect(first.result.is_error).toBe(false);
    expect(JSON.stringify(first.messages)).toContain('done.');
    await waitFor(
      async () => (await client.listSessions()).find((s) => s.id === session.id)?.state === 'agent-lost',
      15_000,
      'the session to wait for its agent',
    );

    await startAgent();
    await session.sendUserMessage('Are you still there?');
    const second = await readTurn(session, () => undefined, items, 90_000);
    expect(second.result.is_error).toBe(false);
    expect(resumedEvents([...first.items, ...second.items])).toMatchObject([{ interrupted_turn: false }]);
    const last = asked('Are you still there?');
    expect(last).toHaveLength(1);
    expect(last[0].raw).toContain('Count to five, eight times.');
    expect(last[0].raw).toContain('done.');
    expect(asked('Count to five, eight times.')).toHaveLength(1);
  }, 240_000);

  it('a transcript that cannot be resumed ends the session with the reason', async ({ onTestFinished }) => {
    const { client, startAgent, home, crash } = await setUp(onTestFinished, { responses: [{ text: 'Hello.' }] });
    const session = await client.createSession({ agent: 'builder' });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('Hi.');
    await readTurn(session, () => undefined, items, 60_000);
    await crash(client, session.id);
    // The engine keeps its transcripts under HOME/.claude/projects: gone, as on another machine.
    rmSync(join(home, '.claude', 'projects'), { recursive: true, force: true });
    await startAgent();
    const seen = await readUntil(items, (i) => i.kind === 'event' && i.event.subtype === 'exited', 60_000, 'the session to end');
    const exited =
      seen.at(-1)?.kind === 'event' ? (seen.at(-1) as { event: Extract<TetherEvent, { subtype: 'exited' }> }).event : undefined;
    expect(exited?.reason).toMatch(/the agent restarted and the engine's transcript .* could not be resumed: .*No conversation found/s);
  }, 240_000);
});
