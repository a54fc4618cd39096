/**
 * The flaky-network case of issue 14, on WebSocket and gRPC: an agent running the real Claude
 * Code CLI (scripted fake model) and a `tether chat --json` child process, each behind a fault
 * proxy that cuts its link at random from the first second on, before and during session
 * creation and all through 20 prompts. Counted: requests at the fake Messages API (each prompt
 * exactly once), results at the client (each prompt exactly once), engine processes (exactly
 * one for the session, none left at the end).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { TETHER_BIN } from './support/cli.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { withTimeout } from './support/stack.js';
import { startRig, type StartRig } from './support/start-rig.js';
import { waitFor } from './support/wait.js';
import { randomInt, testRandom } from './support/seed.js';
import { cleanupsPerTest } from './support/cleanups.js';

const PROMPTS = 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The current test's fault schedule: from the run's seed (TETHER_TEST_SEED replays it). */
const rand = (lo: number, hi: number) => randomInt(testRandom(), lo, hi);
const figures: string[] = [];

/** The text of a user message's content (string or blocks). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? content.map((b: { text?: unknown }) => (typeof b?.text === 'string' ? b.text : '')).join('') : '';
}

describe('flaky network: links cut at random from the first second, real CLI', () => {
  const cleanups = cleanupsPerTest({ tolerant: true });
  afterAll(() => console.log(`flaky-network summary:\n${figures.join('\n')}`));

  for (const transport of ['ws', 'grpc'] as const) {
    it(`${transport}: tether chat --json starts its session and runs ${PROMPTS} prompts through random cuts: none lost, none run twice, one engine`, async () => {
      const home: TempDir = makeTempDir('tether-home-');
      cleanups.push(() => home.cleanup());
      const fake: FakeAnthropic = await startFakeAnthropic({
        responses: [],
        fallback: { text: 'Noted, and on it right now.', chunk_delay_ms: 30 },
      });
      cleanups.push(() => fake.close());
      const rig: StartRig = await startRig({
        transport,
        engineArgv: [claudeBinaryPath()],
        engineEnv: claudeTestEnv({ home: home.path, baseUrl: fake.url }),
      });
      cleanups.push(() => rig.stop());
      // A little latency with jitter on every chunk (threats B11), on top of the cuts.
      for (const proxy of [rig.agentProxy, rig.clientProxy]) proxy.setLatency(1, 4);
      const started = Date.now();
      const dir = rig.stack.gateway.directory;
      // The agent's link is down as the command starts: its create lands while the agent reconnects.
      rig.agentProxy.refuse(true);
      rig.agentProxy.cutAll();
      await waitFor(() => dir.agent(rig.agentName) === undefined, 5_000, 'the gateway to see the agent gone');

      const chat = spawn(process.execPath, [TETHER_BIN, 'chat', '--agent', rig.agentName, '--json'], {
        env: { ...process.env, TETHER_GATEWAY: rig.clientProxy.url(transport), TETHER_TOKEN: rig.stack.token },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      const exited = new Promise<number | null>((resolve) => chat.on('exit', (code) => resolve(code)));
      cleanups.push(() => chat.exitCode === null && chat.kill('SIGKILL'));
      let stderr = '';
      chat.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const results: Record<string, unknown>[] = [];
      createInterface({ input: chat.stdout }).on('line', (line) => {
        const v = JSON.parse(line) as Record<string, unknown>;
        if (v.type === 'result') results.push(v);
      });

      // The cutter: from the first second on, the agent's link at once, the client's as soon as
      // its create has reached the gateway (a cut inside its very first hello would only make
      // the command exit, as it should: there is nothing to retry yet). On top of the random
      // cuts: the agent comes back a moment after the create landed, and its link is cut again
      // while the engine spawns.
      const cuts = { agent: 0, client: 0, beforeBound: 0 };
      let atBound = { agent: 0, client: 0 };
      let bound = false;
      let stop = false;
      const count = (n: number) => {
        cuts.agent = rig.agentProxy.cutsDone;
        cuts.client = rig.clientProxy.cutsDone;
        if (!bound) cuts.beforeBound += n;
      };
      count(1);
      void waitFor(() => dir.sessionList().length > 0, 20_000, 'the create').then(async () => {
        await sleep(300);
        rig.agentProxy.refuse(false);
        await waitFor(() => rig.engine.pids().length > 0, 20_000, 'the engine to spawn');
        count(rig.agentProxy.cutAll());
      });
      const cutter = (async () => {
        while (!stop) {
          await sleep(rand(80, 400));
          if (stop) break;
          const clientToo = dir.sessionList().length > 0;
          const n =
            (testRandom()() < 0.5 || !clientToo ? rig.agentProxy.cutAll() : 0) +
            (clientToo && testRandom()() < 0.6 ? rig.clientProxy.cutAll() : 0);
          if (n) count(n);
        }
      })();
      cleanups.push(() => {
        stop = true;
        return cutter;
      });

      const fail = (what: string) => (err: Error) => {
        throw new Error(
          `${err.message} (${what}); results ${results.length}; cuts ${JSON.stringify(cuts)}; chat stderr:\n${stderr.slice(-3000)}`,
        );
      };
      await waitFor(() => dir.sessionList().some((s) => s.currentState !== 'starting'), 30_000, 'the session to start').catch(
        fail('start'),
      );
      bound = true;
      atBound = { agent: rig.agentProxy.cutsDone, client: rig.clientProxy.cutsDone };
      const boundAfterMs = Date.now() - started;
      for (let i = 1; i <= PROMPTS; i++) {
        chat.stdin.write(JSON.stringify({ type: 'user', message: { role: 'user', content: `prompt number ${i}` } }) + '\n');
        if (i % 4 === 0) count(rig.clientProxy.cutAll()); // a prompt on its way as the link drops
        await waitFor(() => results.length >= i, 20_000, `result ${i}`).catch(fail(`prompt ${i}`));
      }
      stop = true;
      await cutter;
      chat.stdin.end();
      const code = await withTimeout(exited, 20_000, 'tether chat to exit after stdin EOF').catch(fail('exit'));
      expect(code).toBe(0);

      // Each prompt reached the model exactly once, and each came back exactly once.
      const asked = fake.modelRequests().map((r) => textOf(r.lastMessage?.content));
      for (let i = 1; i <= PROMPTS; i++)
        expect(
          asked.filter((t) => new RegExp(`prompt number ${i}(?!\\d)`).test(t)),
          `prompt ${i} at the model`,
        ).toHaveLength(1);
      expect(results).toHaveLength(PROMPTS);
      expect(results.every((r) => r.is_error === false)).toBe(true);
      // One session, one engine, and none left.
      expect(dir.sessionList().filter((s) => s.agent === rig.agentName)).toHaveLength(1);
      expect(rig.engine.pids()).toHaveLength(1);
      await waitFor(() => rig.engine.alive().length === 0, 10_000, 'no engine left');
      const total = cuts.agent + cuts.client;
      figures.push(
        `${transport}: cuts=${total} (agent link ${cuts.agent}, client link ${cuts.client}; before the session was bound at ${boundAfterMs} ms: agent ${atBound.agent}, client ${atBound.client}), ` +
          `prompts=${PROMPTS}, model requests=${asked.length}, results=${results.length}, engines started=${rig.engine.pids().length}, engines left=${rig.engine.alive().length}, ` +
          `waited-for-agent notices=${(stderr.match(/waiting for agent/g) ?? []).length}, run ${Date.now() - started} ms`,
      );
      expect(total).toBeGreaterThanOrEqual(20);
      expect(cuts.beforeBound).toBeGreaterThanOrEqual(2);
      expect(stderr).toContain(`* waiting for agent "${rig.agentName}" to come back`);
    }, 60_000);
  }
});
