import { afterEach, describe, expect, it } from 'vitest';
import { Policy } from '../core/policy/policy.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { startRig, type EngineRig } from './support/engines.js';
import { rejectionOf } from './support/items.js';

/**
 * A subagent's model is a model the session runs: the policy's `models` list judges it as it
 * judges `--model` and `set_model`, in the Agent SDK's `initialize.agents` and in `--agents`
 * JSON (when the agent's owner lets clients pass that flag). Real CLI, fake API.
 */

const policy = new StaticPolicy(Policy.compile({ models: ['claude-sonnet-4-5', 'claude-haiku-*'] }));
const agentsOf = (model: string) => ({ reviewer: { description: 'Reviews a change', prompt: 'You review.', model } });

describe("subagent models meet the policy's model list", () => {
  let rig: EngineRig | undefined;
  afterEach(async () => {
    await rig?.stop();
    rig = undefined;
  });

  it("initialize.agents: a model off the list is refused before the engine; one on it (or inherit) is the engine's", async () => {
    rig = await startRig('claude', { responses: [] }, { policy });
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent', options: { client_initialize: true } });
    const off = await rejectionOf(session.request('initialize', { agents: agentsOf('claude-opus-4-1') }));
    expect(off.code).toBe('PERMISSION_DENIED');
    expect(off.message).toBe(
      'model "claude-opus-4-1" is not allowed by the policy (policy rule: models = claude-sonnet-4-5, claude-haiku-*)',
    );
    expect(
      (
        await rejectionOf(
          session.request('initialize', {
            agents: { a: { description: 'd', prompt: 'p', model: 'inherit' }, b: { description: 'd', prompt: 'p', model: 'opus' } },
          }),
        )
      ).code,
    ).toBe('PERMISSION_DENIED');
    const on = (await session.request('initialize', {
      agents: { ...agentsOf('claude-haiku-4-5'), helper: { description: 'd', prompt: 'p', model: 'inherit' } },
    })) as { response: { subtype: string; response: { agents: Array<{ name: string }> } } };
    expect(on.response.subtype).toBe('success');
    expect(on.response.response.agents.map((a) => a.name)).toEqual(expect.arrayContaining(['reviewer', 'helper']));
    await session.stop();
  });

  it("--agents JSON in extra_args (allowed by the agent's owner): a model off the list refuses the session", async () => {
    rig = await startRig('claude', { responses: [] }, { policy, agentOptions: { engineFlags: { allowFlags: ['--agents'] } } });
    const client = await rig.stack.client();
    const off = await rejectionOf(
      client.createSession({ agent: 'test-agent', options: { extra_args: ['--agents', JSON.stringify(agentsOf('claude-opus-4-1'))] } }),
    );
    expect(off.code).toBe('PERMISSION_DENIED');
    expect(off.message).toContain('model "claude-opus-4-1" is not allowed by the policy');
    const eq = await rejectionOf(
      client.createSession({ agent: 'test-agent', options: { extra_args: [`--agents=${JSON.stringify(agentsOf('opus'))}`] } }),
    );
    expect(eq.code).toBe('PERMISSION_DENIED');
    const on = await client.createSession({
      agent: 'test-agent',
      options: { extra_args: ['--agents', JSON.stringify(agentsOf('claude-sonnet-4-5'))] },
    });
    const status = (await on.request('get_settings')) as { response: { subtype: string } };
    expect(status.response.subtype).toBe('success'); // the engine runs with the allowed subagent
    await on.stop();
  });
});
