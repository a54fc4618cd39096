import { createHmac, timingSafeEqual } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { silentLogger } from '../core/logging.js';
import type { AttentionEvent } from '../core/protocol/attention.js';
import { NOTIFY_ANSWER_PATH, NOTIFY_LOG_PATH, NOTIFY_WEBHOOKS_PATH } from '../core/protocol/http-paths.js';
import { AttentionDesk } from '../gateway/attention/attention-desk.js';
import { Notifier } from '../gateway/attention/notifier.js';
import type { WebhookTarget } from '../gateway/attention/notify-keys.js';
import { MemoryPrefsStore } from '../gateway/attention/notify-prefs.js';
import { shapeWebhook } from '../gateway/attention/webhook-shapes.js';
import { GatewayMetrics } from '../gateway/metrics.js';
import type { BudgetNotice } from '../gateway/usage/usage-desk.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startRig } from './support/engines.js';
import { until } from './support/items.js';
import { waitFor } from './support/wait.js';
import { startWebhookReceiver, type ReceivedPost } from './support/webhook-receiver.js';

const SECRET = 'a shared secret the test knows';
const isResult = (i: SessionItem) => i.kind === 'engine' && i.origin === 'engine' && i.message.type === 'result';

/** What a receiver does: recompute the HMAC over "<timestamp>.<raw body>" and compare in constant time; refuse an old timestamp. */
function verify(post: ReceivedPost, secret: string, nowMs = Date.now()): boolean {
  const ts = String(post.headers['x-tether-timestamp'] ?? '');
  const sig = String(post.headers['x-tether-signature'] ?? '');
  if (!/^\d+$/.test(ts) || Math.abs(nowMs / 1000 - Number(ts)) > 300) return false;
  const want = Buffer.from(`sha256=${createHmac('sha256', secret).update(`${ts}.${post.body}`).digest('hex')}`);
  return want.length === Buffer.byteLength(sig) && timingSafeEqual(want, Buffer.from(sig));
}

/** A demo rig whose gateway has the attention room, with the operator's `webhooks`. */
async function rigWith(cleanups: ReturnType<typeof cleanupsPerTest>, webhooks: WebhookTarget[]) {
  const metrics = new GatewayMetrics();
  // The usage room's budget notices, as the test raises them (gateway/usage/ raises them when a turn crosses a mark).
  const budgetListeners = new Set<(n: BudgetNotice) => void>();
  const budgets = {
    onNotice: (fn: (n: BudgetNotice) => void) => (budgetListeners.add(fn), () => budgetListeners.delete(fn)),
    raise: (n: BudgetNotice) => {
      for (const fn of budgetListeners) fn(n);
    },
  };
  let desk: AttentionDesk | undefined;
  const rig = cleanups.own(
    await startRig('demo', undefined, {
      notify: (gateway) => {
        const notifier = new Notifier({
          webhooks,
          prefs: new MemoryPrefsStore(),
          logger: silentLogger,
          retry: { firstDelayMs: 50, maxDelayMs: 200, timeoutMs: 5_000 },
          metrics,
        });
        desk = new AttentionDesk(gateway.directory, notifier, { allowHttpLoopback: true, budgets });
        return desk;
      },
    }),
  );
  cleanups.push(() => desk!.notifier.settled());
  return { rig, desk: desk!, metrics, budgets, http: rig.stack.wsUrl.replace(/^ws/, 'http') };
}

describe('webhooks (gateway/attention/)', () => {
  const cleanups = cleanupsPerTest();

  it("the operator's webhook: signed JSON with a timestamp, retried after a 500, one event per prompt, logged", async () => {
    const receiver = cleanups.own(await startWebhookReceiver([500]));
    const { rig, desk } = await rigWith(cleanups, [
      { url: `${receiver.url}/hook`, secret: SECRET, format: 'json', events: ['permission_request'] },
    ]);
    const session = await (await rig.stack.client()).createSession({
      agent: 'test-agent',
      canUseTool: (req) => ({ behavior: 'allow', updatedInput: req.input }),
    });
    const items = session[Symbol.asyncIterator]();
    await session.sendUserMessage('create a file');
    await until(items, isResult);
    await waitFor(() => receiver.posts.length === 2, 10_000, 'the POST and its retry');
    await desk.notifier.settled();
    const [first, retry] = receiver.posts;
    expect(first.body).toBe(retry.body); // the same event, the same id: a receiver shows it once
    const event = JSON.parse(retry.body) as AttentionEvent;
    expect(event).toMatchObject({ type: 'permission_request', session_id: session.id, agent: 'test-agent', tool: 'Bash' });
    expect(event.may_answer?.roles).toEqual(['owner', 'controller']);
    expect(retry.headers['content-type']).toBe('application/json');
    expect(verify(retry, SECRET)).toBe(true);
    expect(verify(retry, 'another secret')).toBe(false);
    expect(verify({ ...retry, body: retry.body.replace('Bash', 'Bish') }, SECRET)).toBe(false);
    expect(verify(retry, SECRET, Date.now() + 3_600_000)).toBe(false); // an hour later: a replay
    expect(receiver.posts).toHaveLength(2); // turn_complete is not among this webhook's events
    expect(desk.notifier.log.recent()).toEqual([
      expect.objectContaining({
        event_id: event.id,
        channel: 'webhook',
        outcome: 'sent',
        attempts: 2,
        status: 200,
        target: `${receiver.url}/…`,
      }),
    ]);
  });

  it('a budget warning reaches the webhook once per budget, mark and window (issue 35), naming the budget and never the prompt', async () => {
    const receiver = cleanups.own(await startWebhookReceiver([]));
    const { rig, desk, budgets } = await rigWith(cleanups, [
      { url: `${receiver.url}/hook`, secret: SECRET, format: 'json', events: ['budget'] },
    ]);
    const session = await (await rig.stack.client()).createSession({ agent: 'test-agent' });
    const notice: BudgetNotice = {
      principal: 'bob',
      session_id: session.id,
      state: 'warning',
      budget: 'budgets[0] (who: *, per: day, usd: 5)',
      share: 0.83,
      message: 'budgets[0] (who: *, per: day, usd: 5): 83 % used; resets 2026-12-03T00:00:00Z',
      resets_at: '2026-12-03T00:00:00.000Z',
    };
    budgets.raise(notice);
    budgets.raise(notice); // a second turn past the same mark in the same window: told once
    budgets.raise({ ...notice, principal: 'ghost', session_id: 'no-such-session' }); // a session gone: nothing
    await waitFor(() => receiver.posts.length === 1, 10_000, 'the budget warning');
    await desk.notifier.settled();
    budgets.raise({ ...notice, state: 'reached', share: 1.02, message: 'budgets[0] (who: *, per: day, usd: 5) is spent' });
    await waitFor(() => receiver.posts.length === 2, 10_000, 'the budget reached');
    await desk.notifier.settled();
    const [warned, reached] = receiver.posts.map((p) => JSON.parse(p.body) as AttentionEvent);
    expect(warned).toMatchObject({ type: 'budget', session_id: session.id, agent: 'test-agent', summary: notice.message });
    expect(reached).toMatchObject({ type: 'budget', summary: 'budgets[0] (who: *, per: day, usd: 5) is spent' });
    expect(warned.id).not.toBe(reached.id);
    expect(verify(receiver.posts[0], SECRET)).toBe(true);
  });

  it("a person's own webhook: https only (loopback when allowed), told only while away from the session; the answer from a notification wins once", async () => {
    const receiver = cleanups.own(await startWebhookReceiver());
    const { rig, http, metrics } = await rigWith(cleanups, []);
    const bobToken = await rig.stack.mint({ kind: 'client', sub: 'bob' });
    const call = async (path: string, body: unknown, method = 'POST', token = rig.stack.token!) => {
      const res = await fetch(`${http}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: method === 'GET' ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const refused = await call(NOTIFY_WEBHOOKS_PATH, { url: 'http://example.com/hook' });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('must be https');
    const added = await call(NOTIFY_WEBHOOKS_PATH, { url: `${receiver.url}/mine`, format: 'json' });
    expect(added.status).toBe(200);
    const secret = String(added.body.secret);
    expect((await call(NOTIFY_WEBHOOKS_PATH, { url: `${receiver.url}/bob` }, 'POST', bobToken)).status).toBe(200);

    const owner = await rig.stack.client();
    const created = await owner.createSession({ agent: 'test-agent' });
    await owner.detach(created); // the owner is away; bob works in the session
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(created.id);
    const items = bob[Symbol.asyncIterator]();
    await bob.sendUserMessage('create a file');
    await waitFor(() => receiver.posts.length === 1, 10_000, "the owner's webhook to be told");
    const post = receiver.posts[0];
    expect(verify(post, secret)).toBe(true);
    const event = JSON.parse(post.body) as AttentionEvent;
    expect(event).toMatchObject({ type: 'permission_request', session_id: created.id, tool: 'Bash' });
    expect(event.may_answer?.principals).toEqual(['test-user', 'bob']);

    const first = await call(NOTIFY_ANSWER_PATH, { id: event.id, decision: 'allow' });
    expect(first).toEqual({ status: 200, body: { session_id: created.id, request_id: event.request_id } });
    const turn = (await until(items, isResult)) as { message: Record<string, unknown> };
    expect(turn.message.is_error).toBe(false);
    const late = await call(NOTIFY_ANSWER_PATH, { id: event.id, decision: 'deny' });
    expect(late.status).toBe(400);
    expect(late.body).toEqual({ error: { code: 'FAILED_PRECONDITION', message: 'already answered: allow by test-user' } });
    const unknown = await call(NOTIFY_ANSWER_PATH, { id: 'no-such-prompt', decision: 'deny' });
    expect(unknown.status).toBe(404);
    // The turn's end is the owner's, told to the same webhook.
    await waitFor(() => receiver.posts.length === 2, 10_000, 'turn_complete');
    expect((JSON.parse(receiver.posts[1].body) as AttentionEvent).type).toBe('turn_complete');
    expect(receiver.posts.every((p) => p.path === '/mine')).toBe(true); // bob had the session open: his webhook was left out
    expect((await metrics.render()).body).toContain('tether_notifications_total{channel="webhook",outcome="suppressed"} 1');
    // The delivery log is for admins only.
    expect((await call(NOTIFY_LOG_PATH, undefined, 'GET')).status).toBe(403);
  });
});

describe('webhook shapes', () => {
  const event: AttentionEvent = {
    id: 'abc',
    type: 'permission_request',
    session_id: 's1',
    agent: 'box',
    at: '2026-01-01T00:00:00.000Z',
    tool: 'Bash',
    summary: 'box asks to use Bash',
  };

  it('slack: {text, blocks} with a link to the session', () => {
    const r = shapeWebhook('slack', 'https://hooks.slack.test/services/T/B/x', event, 'https://gw.test/#session=s1');
    expect(r.url).toBe('https://hooks.slack.test/services/T/B/x');
    const body = JSON.parse(r.body);
    expect(body.text).toBe('Permission needed: box: box asks to use Bash');
    expect(body.blocks[0].text.text).toContain('<https://gw.test/#session=s1|Open the session>');
  });

  it('ntfy: a JSON publish to the server root naming the topic, with title, priority and tags', () => {
    const r = shapeWebhook('ntfy', 'https://ntfy.test/tether-alerts', event);
    expect(r.url).toBe('https://ntfy.test/');
    expect(JSON.parse(r.body)).toEqual({
      topic: 'tether-alerts',
      title: 'Permission needed: box',
      message: 'box asks to use Bash',
      priority: 4,
      tags: ['permission_request'],
    });
  });
});
