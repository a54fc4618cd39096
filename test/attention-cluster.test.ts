import { createHash } from 'node:crypto';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
/**
 * Issue 33 in a cluster: people's notification settings and the VAPID keys are the cluster's
 * (gateway/cluster/shared-notify.ts), and a person may follow a session (session.follow). A real
 * nats-server on deploy/nats-cluster.conf's permissions, two `tether gateway --cluster`
 * processes, the agent (on gateway 0, through the balancer) running the real Claude Code CLI
 * against the scripted fake Messages API; a push service stand-in and a webhook receiver on loopback.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { AttentionPush } from '../core/protocol/attention.js';
import { NOTIFY_SETTINGS_PATH, NOTIFY_SUBSCRIPTIONS_PATH, NOTIFY_WEBHOOKS_PATH } from '../core/protocol/http-paths.js';
import { NOTIFY_BUCKET } from '../gateway/cluster/shared-notify.js';
import { BASH_TURN, DEPLOYED_NATS, startClusterStack, type ClusterStack } from './support/cluster-stack.js';
import { isCanUseTool, isResult, until } from './support/items.js';
import { browserKeys, checkVapid, decryptPush, startPushService } from './support/push-service.js';
import { hasTool } from './support/tools.js';
import { waitFor } from './support/wait.js';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.js';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';

const TEARDOWN_MS = 90_000;

describe.skipIf(!hasTool('nats-server'))("attention in a cluster: the cluster's settings and VAPID keys, following a session", () => {
  let stack: ClusterStack;
  let service: Awaited<ReturnType<typeof startPushService>>;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    service = await startPushService();
    receiver = await startWebhookReceiver();
    stack = await startClusterStack({
      gateways: 2,
      scenario: BASH_TURN,
      nats: DEPLOYED_NATS,
      gatewayArgs: ['--notify-allow-http-loopback'],
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    await service?.close();
    await receiver?.close();
  }, TEARDOWN_MS);
  const dumpLogsOnFailure = () =>
    onTestFailed(() => {
      for (const g of stack.gateways) process.stderr.write(`--- ${g.id} (${g.url})\n${g.daemon.stderr()}\n`);
    });
  /** An HTTP request to gateway `n` as `sub`. */
  const asPerson = async (n: number, sub: string, path: string, body?: unknown) =>
    fetch(`${stack.gateways[n].url.replace(/^ws/, 'http')}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${await stack.token(sub)}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it('a person subscribed through gateway 1 is pushed, once, a prompt raised on the agent of gateway 0, signed with the one VAPID key of both', async () => {
    dumpLogsOnFailure();
    const keys = await Promise.all(
      [0, 1].map(
        async (n) => ((await (await asPerson(n, 'alice', NOTIFY_SETTINGS_PATH)).json()) as { vapid_public_key: string }).vapid_public_key,
      ),
    );
    expect(keys[0]).toMatch(/^[\w-]{80,}$/);
    expect(keys[1]).toBe(keys[0]);

    const browser = browserKeys(`${service.origin}/sub/alice`);
    expect((await asPerson(1, 'alice', NOTIFY_SUBSCRIPTIONS_PATH, browser.json)).status).toBe(200);
    // Alice, away, owns a session bob drives through gateway 1; the agent and the session are on gateway 0.
    const alice = await stack.client(1, 'alice');
    const created = await alice.createSession({ agent: 'builder' });
    await alice.detach(created);
    const bob = await (await stack.client(1, 'bob')).attach(created.id);
    const it = bob[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await bob.sendUserMessage('append a line');
    const prompt = await until(it, isCanUseTool, seen, 30_000, 'the permission prompt');
    const ask = asPermissionRequest((prompt as { message: Record<string, unknown> }).message)!;
    await bob.answer(ask.requestId, { behavior: 'deny', message: 'not now' });
    await until(it, isResult, seen, 30_000, 'the result of the turn');
    await waitFor(() => service.received.length >= 2, 10_000, "alice's pushes (the prompt, the turn's end)");

    const pushes = service.received.map((m) => JSON.parse(decryptPush(m.body, browser)) as AttentionPush);
    expect(pushes.filter((p) => p.type === 'permission_request')).toHaveLength(1);
    expect(pushes.find((p) => p.type === 'permission_request')).toMatchObject({ session_id: created.id, agent: 'builder', tool: 'Bash' });
    for (const m of service.received) expect(checkVapid(String(m.headers.authorization), keys[0], service.origin)).toBeDefined();
  });

  it("a follower (not the owner, not attached) gets the turn's end by webhook; unfollowed, not", async () => {
    dumpLogsOnFailure();
    // Carol follows, then stops; dave follows throughout: his webhook tells when carol's would have had the second turn's end.
    for (const who of ['carol', 'dave'])
      expect((await asPerson(1, who, NOTIFY_WEBHOOKS_PATH, { url: `${receiver.url}/${who}`, format: 'json' })).status).toBe(200);
    const alice = await stack.client(1, 'alice');
    const s = await alice.createSession({ agent: 'builder' });
    const it = s[Symbol.asyncIterator]();
    const follow = async (who: string, on: boolean) => {
      const c = await stack.client(1, who);
      const viewer = await c.attach(s.id, { readOnly: true });
      await viewer.follow(on);
      await c.detach(viewer);
    };
    await follow('carol', true);
    await follow('dave', true);
    const turnEnds = (who: string) =>
      receiver.posts.filter((p) => p.path === `/${who}` && (JSON.parse(p.body) as { type: string }).type === 'turn_complete');

    await s.sendUserMessage('say ok');
    await until(it, isResult, [], 30_000, 'the first turn');
    await waitFor(
      () => turnEnds('carol').length === 1 && turnEnds('dave').length === 1,
      10_000,
      "the followers' webhooks to get the turn's end",
    );
    expect(JSON.parse(turnEnds('carol')[0].body)).toMatchObject({ type: 'turn_complete', session_id: s.id, agent: 'builder' });

    await follow('carol', false);
    await s.sendUserMessage('say ok again');
    await until(it, isResult, [], 30_000, 'the second turn');
    await waitFor(() => turnEnds('dave').length === 2, 10_000, "dave's webhook to get the second turn's end");
    expect(turnEnds('carol')).toHaveLength(1);
  });

  it('settings put in the bucket by a client of NATS that is not a gateway (it has the NATS password, not the key) are dropped: no notification goes where they say', async () => {
    dumpLogsOnFailure();
    expect((await asPerson(1, 'frank', NOTIFY_WEBHOOKS_PATH, { url: `${receiver.url}/frank`, format: 'json' })).status).toBe(200);
    const alice = await stack.client(1, 'alice');
    const s = await alice.createSession({ agent: 'builder' });
    const it = s[Symbol.asyncIterator]();
    const frank = await stack.client(1, 'frank');
    const viewer = await frank.attach(s.id, { readOnly: true });
    await viewer.follow(true);
    await frank.detach(viewer);

    // The forger files erin as a follower of the session, with a webhook of its choosing.
    const forger = await connect({
      servers: stack.nats.url.replace('nats://', ''),
      user: stack.nats.user,
      pass: stack.nats.pass,
      timeout: 5_000,
    });
    try {
      const kv = await new Kvm(forger).open(NOTIFY_BUCKET);
      const prefs = {
        subscriptions: [],
        webhooks: [{ id: 'w', url: `${receiver.url}/forged`, secret: 'x', format: 'json', created_at: new Date().toISOString() }],
        follows: [s.id],
      };
      await kv.put(`n.${createHash('sha256').update('erin').digest('hex').slice(0, 40)}`, JSON.stringify({ principal: 'erin', prefs }));
    } finally {
      await forger.close();
    }
    const dropped = 'dropping notification settings no gateway wrote';
    await waitFor(() => stack.gateways.every((g) => g.daemon.stderr().includes(dropped)), 10_000, 'both gateways to drop the forged entry');

    await s.sendUserMessage('say ok');
    await until(it, isResult, [], 30_000, 'the turn');
    const turnEnds = (who: string) => receiver.posts.filter((p) => p.path === `/${who}`);
    await waitFor(() => turnEnds('frank').length === 1, 10_000, "frank's webhook to get the turn's end");
    expect(turnEnds('forged')).toHaveLength(0);
  });

  it("a person's changes through both gateways at once are all kept, on both", async () => {
    dumpLogsOnFailure();
    // Ten browsers (the most a person may have), five subscribed through each gateway, all at once.
    const endpoints = Array.from({ length: 10 }, (_, k) => `${service.origin}/sub/gina-${k}`);
    const added = await Promise.all(endpoints.map((e, k) => asPerson(k % 2, 'gina', NOTIFY_SUBSCRIPTIONS_PATH, browserKeys(e).json)));
    expect(added.map((r) => r.status)).toEqual(endpoints.map(() => 200));
    const held = async (n: number) =>
      ((await (await asPerson(n, 'gina', NOTIFY_SETTINGS_PATH)).json()) as { subscriptions: { endpoint: string }[] }).subscriptions
        .map((x) => x.endpoint)
        .sort();
    for (const n of [0, 1]) await expect.poll(() => held(n), { timeout: 10_000 }).toEqual([...endpoints].sort());
  });
});
