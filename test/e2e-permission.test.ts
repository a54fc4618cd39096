import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startRig, WRITE_FILE } from './support/engines.js';
import { TRANSPORT_PAIRS } from './support/stack.js';
import { readTurn, toolResults } from './support/turns.js';
import { cleanupsPerTest } from './support/cleanups.js';

/**
 * The walking skeleton's promise: a client drives a turn through gateway and agent, the
 * engine's permission prompt reaches the client, and the client's answer decides whether
 * the tool runs on the agent's machine. Once with the real CLI, once with the demo engine.
 */
const CASES = (['claude', 'demo'] as const).flatMap((engine) => TRANSPORT_PAIRS.map((t) => ({ engine, ...t })));

describe.each(CASES)(
  'permission round trip: $engine engine, client over $client, agent over $agent',
  ({ engine: kind, client: clientTransport, agent: agentTransport }) => {
    const cleanups = cleanupsPerTest();

    it('allow: the prompt reaches the client and the tool runs in the agent cwd', async () => {
      const script = WRITE_FILE[kind];
      const rig = cleanups.own(await startRig(kind, script.scenario, { clientTransport, agentTransport }));
      const client = await rig.stack.client();
      const session = await client.createSession({ agent: 'test-agent' });
      expect(session.role).toBe('owner');
      await session.sendUserMessage(script.prompt);
      const turn = await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }));
      expect(turn.prompts.map((p) => p.toolName)).toEqual(['Bash']);
      expect(turn.result.is_error).toBe(false);
      expect(existsSync(join(rig.cwd, script.file))).toBe(true);
      expect(readFileSync(join(rig.cwd, script.file), 'utf8').length).toBeGreaterThan(0);
      expect(toolResults(turn.messages).some((r) => !r.is_error)).toBe(true);
      if (rig.fake) expect(rig.fake.lastToolResults().at(-1)?.is_error).toBeFalsy();
    });

    it('deny: the tool does not run and the model sees the denial', async () => {
      const script = WRITE_FILE[kind];
      const rig = cleanups.own(await startRig(kind, script.scenario, { clientTransport, agentTransport }));
      const client = await rig.stack.client();
      const session = await client.createSession({ agent: 'test-agent' });
      await session.sendUserMessage(script.prompt);
      const turn = await readTurn(session, () => ({ behavior: 'deny', message: 'Not allowed by the test' }));
      expect(turn.prompts).toHaveLength(1);
      expect(existsSync(join(rig.cwd, script.file))).toBe(false);
      const denied = toolResults(turn.messages).find((r) => r.is_error);
      expect(denied?.content).toContain('Not allowed by the test');
      if (rig.fake) {
        const seen = rig.fake.lastToolResults().at(-1);
        expect(seen?.is_error).toBe(true);
        expect(seen?.content).toContain('Not allowed by the test');
      }
    });
  },
);
