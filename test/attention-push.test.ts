import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { silentLogger } from '../core/logging.js';
import type { AttentionPush } from '../core/protocol/attention.js';
import { NOTIFY_SETTINGS_PATH, NOTIFY_SUBSCRIPTIONS_PATH, NOTIFY_WEBHOOKS_PATH } from '../core/protocol/http-paths.js';
import { AttentionDesk } from '../gateway/attention/attention-desk.js';
import { Notifier } from '../gateway/attention/notifier.js';
import { FilePrefsStore, MemoryPrefsStore } from '../gateway/attention/notify-prefs.js';
import { PushSender } from '../gateway/attention/push-sender.js';
import { newVapidKeys } from '../gateway/attention/vapid-keys.js';
import { GatewayMetrics } from '../gateway/metrics.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startRig } from './support/engines.js';
import { until } from './support/items.js';
import { browserKeys, checkVapid, decryptPush, startPushService } from './support/push-service.js';
import { runTether } from './support/cli.js';
import { waitFor } from './support/wait.js';
import { startWebhookReceiver } from './support/webhook-receiver.js';

const SUBJECT = 'mailto:ops@tether.test';
const isResult = (i: SessionItem) => i.kind === 'engine' && i.origin === 'engine' && i.message.type === 'result';

/** A demo rig whose gateway sends Web Push (fresh VAPID keys), people's settings in memory. */
function pushRig(allowHttpLoopback: boolean) {
  return startRig('demo', undefined, {
    notify: (gateway) =>
      new AttentionDesk(
        gateway.directory,
        new Notifier({ webhooks: [], prefs: new MemoryPrefsStore(), push: new PushSender(newVapidKeys(), SUBJECT), logger: silentLogger }),
        { allowHttpLoopback },
      ),
  });
}

describe('Web Push to a push service stand-in (gateway/attention/push-sender.ts)', () => {
  const cleanups = cleanupsPerTest();

  it('VAPID-signed, encrypted for the subscription, one push per prompt across a retry, none for a call a rule approved, a gone subscription dropped', async () => {
    // The first message to /sub/a fails (500) and is retried; /sub/gone answers 410 as a revoked subscription does.
    const service = cleanups.own(await startPushService({ '/sub/a': [500], '/sub/gone': [410] }));
    const vapid = newVapidKeys();
    const metrics = new GatewayMetrics();
    let desk: AttentionDesk | undefined;
    const rig = cleanups.own(
      await startRig('demo', undefined, {
        notify: (gateway) => {
          const notifier = new Notifier({
            webhooks: [],
            prefs: new MemoryPrefsStore(),
            push: new PushSender(vapid, SUBJECT),
            metrics,
            logger: silentLogger,
            retry: { firstDelayMs: 50, maxDelayMs: 200, timeoutMs: 5_000 },
          });
          desk = new AttentionDesk(gateway.directory, notifier, { allowHttpLoopback: true });
          return desk;
        },
      }),
    );
    cleanups.push(() => desk!.notifier.settled());
    const http = rig.stack.wsUrl.replace(/^ws/, 'http');
    const asOwner = (path: string, body?: unknown) =>
      fetch(`${http}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${rig.stack.token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const browser = browserKeys(`${service.origin}/sub/a`);
    const gone = browserKeys(`${service.origin}/sub/gone`);
    expect((await asOwner(NOTIFY_SUBSCRIPTIONS_PATH, browser.json)).status).toBe(200);
    expect((await asOwner(NOTIFY_SUBSCRIPTIONS_PATH, gone.json)).status).toBe(200);
    const settings = (await (await asOwner(NOTIFY_SETTINGS_PATH)).json()) as { vapid_public_key: string; subscriptions: unknown[] };
    expect(settings.vapid_public_key).toBe(vapid.publicKey);
    expect(settings.subscriptions).toHaveLength(2);

    // The owner is away; bob works, and grants himself a session rule for the call.
    const owner = await rig.stack.client();
    const created = await owner.createSession({ agent: 'test-agent' });
    await owner.detach(created);
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(created.id, {
      canUseTool: (req) => ({ behavior: 'allow', updatedInput: req.input, rememberForSession: true }),
    });
    const items = bob[Symbol.asyncIterator]();
    await bob.sendUserMessage('create a file');
    await until(items, isResult);
    await bob.sendUserMessage('create a file again'); // the rule answers: no prompt, no push
    await until(items, isResult);
    await waitFor(() => service.received.filter((m) => m.path === '/sub/a').length === 4, 10_000, 'the pushes to /sub/a');
    await desk!.notifier.settled();

    const toA = service.received.filter((m) => m.path === '/sub/a');
    const pushes = toA.map((m) => JSON.parse(decryptPush(m.body, browser)) as AttentionPush);
    // The prompt's push twice (a 500, then its retry: one message, one id), then the two turns' ends.
    expect(pushes.map((p) => p.type)).toEqual(['permission_request', 'permission_request', 'turn_complete', 'turn_complete']);
    expect(pushes[0]).toEqual(pushes[1]);
    expect(pushes[0]).toMatchObject({ session_id: created.id, agent: 'test-agent', tool: 'Bash', answerable: true });
    expect(pushes[0]).not.toHaveProperty('may_answer');
    expect(JSON.stringify(pushes[0])).not.toContain('tether-demo.txt'); // never the tool's input
    for (const m of toA) {
      expect(m.headers['content-encoding']).toBe('aes128gcm');
      expect(Number(m.headers.ttl)).toBeGreaterThan(0);
      expect(checkVapid(String(m.headers.authorization), vapid.publicKey, service.origin)).toMatchObject({ sub: SUBJECT });
    }
    expect(toA[0].headers.topic).toBe(pushes[0].id);

    // Derived again (a replay, a second notice): still one push for the prompt.
    rig.stack.gateway.directory.notices!(created.id, {
      kind: 'prompt',
      requestId: pushes[0].request_id!,
      tool: 'Bash',
      interactive: false,
    });
    await desk!.notifier.settled();
    expect(service.received.filter((m) => m.path === '/sub/a')).toHaveLength(4);

    // The revoked subscription was tried once and dropped.
    expect(service.received.filter((m) => m.path === '/sub/gone')).toHaveLength(1);
    const after = (await (await asOwner(NOTIFY_SETTINGS_PATH)).json()) as { subscriptions: { endpoint: string }[] };
    expect(after.subscriptions.map((s) => s.endpoint)).toEqual([`${service.origin}/sub/a`]);
    const text = (await metrics.render()).body;
    expect(text).toContain('tether_notifications_total{channel="push",outcome="sent"} 3');
    expect(text).toContain('tether_notifications_total{channel="push",outcome="dropped"} 1');
  });

  it('refuses a subscription that is not https (without the loopback allowance) or lacks its keys', async () => {
    const rig = cleanups.own(await pushRig(false));
    const post = async (body: unknown) => {
      const res = await fetch(`${rig.stack.wsUrl.replace(/^ws/, 'http')}${NOTIFY_SUBSCRIPTIONS_PATH}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${rig.stack.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, text: await res.text() };
    };
    const local = await post(browserKeys('http://127.0.0.1:9/x').json);
    expect(local.status).toBe(400);
    expect(local.text).toContain('must be https');
    const keyless = await post({ endpoint: 'https://push.test/x' });
    expect(keyless.status).toBe(400);
    expect(keyless.text).toContain('keys.p256dh');
  });

  it("tether notify test --sub NAME reaches that person's browser and webhook; tether notify log lists it; neither for a non-admin", async () => {
    const service = cleanups.own(await startPushService());
    const receiver = cleanups.own(await startWebhookReceiver());
    const rig = cleanups.own(await pushRig(true));
    const http = rig.stack.wsUrl.replace(/^ws/, 'http');
    const asCarol = (path: string, body: unknown) =>
      fetch(`${http}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${rig.stack.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const browser = browserKeys(`${service.origin}/sub/carol`);
    expect((await asCarol(NOTIFY_SUBSCRIPTIONS_PATH, browser.json)).status).toBe(200);
    expect((await asCarol(NOTIFY_WEBHOOKS_PATH, { url: `${receiver.url}/carol`, format: 'slack' })).status).toBe(200);
    const admin = await rig.stack.mint({ kind: 'client', sub: 'root', scopes: ['admin', 'control', 'create'] });
    const env = { TETHER_GATEWAY: rig.stack.wsUrl, TETHER_TOKEN: admin };

    const test = await runTether(['notify', 'test', '--sub', 'test-user'], { env, timeoutMs: 30_000 });
    expect(test.code, test.stderr).toBe(0);
    expect(test.stdout).toMatch(
      new RegExp(`turn_complete push ${service.origin}/… \\(test-user\\): sent after 1 attempt\\(s\\), HTTP 201`),
    );
    expect(test.stdout).toMatch(
      new RegExp(`turn_complete webhook ${receiver.url}/… \\(test-user\\): sent after 1 attempt\\(s\\), HTTP 200`),
    );
    expect(JSON.parse(decryptPush(service.received[0].body, browser))).toMatchObject({ summary: 'A test notification from the gateway' });
    expect(JSON.parse(receiver.posts[0].body).text).toContain('A test notification from the gateway');

    const log = await runTether(['notify', 'log', '--json'], { env, timeoutMs: 30_000 });
    expect(log.code, log.stderr).toBe(0);
    expect((JSON.parse(log.stdout) as { channel: string }[]).map((r) => r.channel).sort()).toEqual(['push', 'webhook']);

    const refused = await runTether(['notify', 'log'], { env: { ...env, TETHER_TOKEN: rig.stack.token! }, timeoutMs: 30_000 });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('admin scope');
  });

  it("people's settings survive a restart in an owner-only file; a corrupt one is named, not half read", () => {
    const dir = cleanups.tempDir('tether-prefs-');
    const path = join(dir.path, 'notify-prefs.json');
    const sub = { ...browserKeys('https://push.test/a').json, created_at: '2026-01-01T00:00:00.000Z' };
    new FilePrefsStore(path).update('alice', (p) => ({ ...p, subscriptions: [sub] }));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(new FilePrefsStore(path).get('alice').subscriptions).toEqual([sub]);
    expect(() => new FilePrefsStore(path).update('alice', (p) => ({ ...p, subscriptions: Array(11).fill(sub) }))).toThrow(/at most 10/);
    writeFileSync(path, '{"alice":');
    expect(() => new FilePrefsStore(path)).toThrow(`${path} (people's notification settings) cannot be read`);
  });
});
