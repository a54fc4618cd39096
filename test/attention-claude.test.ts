import { describe, expect, it } from 'vitest';
import { silentLogger } from '../core/logging.js';
import { Policy } from '../core/policy/policy.js';
import type { AttentionEvent } from '../core/protocol/attention.js';
import { AttentionDesk } from '../gateway/attention/attention-desk.js';
import { Notifier } from '../gateway/attention/notifier.js';
import { MemoryPrefsStore } from '../gateway/attention/notify-prefs.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startRig } from './support/engines.js';
import { readTurn } from './support/turns.js';
import { waitFor } from './support/wait.js';
import { startWebhookReceiver } from './support/webhook-receiver.js';

/**
 * The real Claude Code CLI (scripted model) under a central policy: a call the policy allows
 * never reaches a webhook as a prompt; a call it leaves to people does, once.
 */
describe('attention with the real Claude Code CLI', () => {
  const cleanups = cleanupsPerTest();

  it('a real permission prompt reaches the webhook; a policy-approved call does not', async () => {
    const receiver = cleanups.own(await startWebhookReceiver());
    let notifier: Notifier | undefined;
    const rig = cleanups.own(
      await startRig(
        'claude',
        {
          responses: [
            {
              text: 'Writing.',
              tool_use: { id: 'toolu_echo', name: 'Bash', input: { command: 'echo hi > made.txt', description: 'write' } },
            },
            { text: 'Done.' },
            {
              text: 'Touching.',
              tool_use: { id: 'toolu_touch', name: 'Bash', input: { command: 'touch other.txt', description: 'touch' } },
            },
            { text: 'Touched.' },
          ],
        },
        {
          policy: new StaticPolicy(Policy.compile({ permissions: { allow: ['Bash(echo *)'] } })),
          notify: (gateway) => {
            notifier = new Notifier({
              webhooks: [{ url: receiver.url, format: 'json' }],
              prefs: new MemoryPrefsStore(),
              logger: silentLogger,
            });
            return new AttentionDesk(gateway.directory, notifier, { allowHttpLoopback: false });
          },
        },
      ),
    );
    cleanups.push(() => notifier!.settled());
    const types = () => receiver.posts.map((p) => (JSON.parse(p.body) as AttentionEvent).type);
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const items = session[Symbol.asyncIterator]();

    await session.sendUserMessage('make a file');
    const allowed = await readTurn(session, () => ({ behavior: 'deny', message: 'no' }), items, 90_000);
    expect(allowed.prompts).toEqual([]); // the policy's allow rule answered the engine's hook
    await waitFor(() => types().length === 1, 10_000, 'the first turn at the webhook');
    expect(types()).toEqual(['turn_complete']);

    await session.sendUserMessage('touch another');
    const asked = await readTurn(session, (p) => ({ behavior: 'allow', updatedInput: p.input }), items, 90_000);
    expect(asked.prompts.map((p) => p.toolName)).toEqual(['Bash']);
    await waitFor(() => types().length === 3, 10_000, 'the prompt and the second turn at the webhook');
    expect(types()).toEqual(['turn_complete', 'permission_request', 'turn_complete']);
    expect(JSON.parse(receiver.posts[1].body)).toMatchObject({
      session_id: session.id,
      agent: 'test-agent',
      tool: 'Bash',
      request_id: asked.prompts[0].requestId,
    });
  }, 240_000);
});
