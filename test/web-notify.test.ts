import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { NOTIFICATION_CLICK_MESSAGE, type AttentionEvent, type AttentionPush } from '../core/protocol/attention.js';
import { sendPrompt, startSession } from './support/browser.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { hasTool } from './support/tools.js';
import { waitFor, withTimeout } from './support/wait.js';
import { startWebDemoRig } from './support/web-demo-rig.js';
import { startWebhookReceiver } from './support/webhook-receiver.js';

/** Bound on each poll of the page (a loaded machine is slow to show a notification). */
const POLL = { timeout: 10_000 };

/** The notifications the page's service worker shows now: title, tag, body and action names. */
function notifications(page: Page) {
  return page.evaluate(async () =>
    (await (await navigator.serviceWorker.ready).getNotifications()).map((n) => ({
      title: n.title,
      tag: n.tag,
      body: n.body,
      actions: ((n as unknown as { actions?: { action: string }[] }).actions ?? []).map((a) => a.action),
    })),
  );
}

/**
 * Runs the service worker's own click handler for a notification (`action`: allow, deny, or ''
 * for the notification itself). DevTools has no way to click a notification, so the worker
 * takes a message that runs the same code path as its `notificationclick` listener.
 */
function click(page: Page, tag: string, action: string): Promise<{ ok: boolean; message: string }> {
  const answered = page.evaluate(
    async ({ type, tag, action }) => {
      const reg = await navigator.serviceWorker.ready;
      const ch = new MessageChannel();
      const answer = new Promise<{ ok: boolean; message: string }>((r) => {
        ch.port1.onmessage = (e) => r(e.data);
      });
      reg.active!.postMessage({ type, tag, action }, [ch.port2]);
      return answer;
    },
    { type: NOTIFICATION_CLICK_MESSAGE, tag, action },
  );
  return withTimeout(answered, 15_000, `the worker's answer to ${action || 'a click'}`);
}

/**
 * Hands the worker of `page` a push message through DevTools (ServiceWorker.deliverPushMessage),
 * as a push service would, until the worker shows a notification tagged with the event's id.
 * DevTools answers before the push reaches the worker and drops a failed delivery silently
 * (Chromium binds a no-op to the delivery's status: a worker that did not start in time on a
 * loaded machine), so one that shows nothing within a few seconds is delivered again, as a push
 * service redelivers an unacknowledged message. The tag makes a second delivery replace the first.
 */
async function deliverPush(page: Page, origin: string, push: AttentionPush): Promise<void> {
  const cdp = await page.context().newCDPSession(page);
  const registration = new Promise<string>((resolve) =>
    cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => {
      const r = e.registrations.find((x) => x.scopeURL === `${origin}/` && !x.isDeleted);
      if (r) resolve(r.registrationId);
    }),
  );
  await cdp.send('ServiceWorker.enable');
  const registrationId = await withTimeout(registration, 10_000, 'the worker registration in DevTools');
  const shown = async () => (await notifications(page)).some((n) => n.tag === push.id);
  try {
    for (let attempt = 1; ; attempt++) {
      await cdp.send('ServiceWorker.deliverPushMessage', { origin, registrationId, data: JSON.stringify(push) });
      try {
        await waitFor(shown, 4_000, `a notification tagged ${push.id}`);
        return;
      } catch (err) {
        if (attempt === 4) throw new Error(`${(err as Error).message}, after ${attempt} deliveries`);
      }
    }
  } finally {
    await cdp.detach();
  }
}

describe.skipIf(!hasTool('chromium'))('web page: installable, push notifications, answer from a notification (Chromium)', () => {
  const cleanups = cleanupsPerTest();

  it('the worker registers; a push shows Allow/Deny for a controller and none for a viewer; Allow answers once, a late one is refused', async () => {
    const receiver = cleanups.own(await startWebhookReceiver());
    const rig = await startWebDemoRig('web-notify', ['--webhook', receiver.url, '--notify-allow-http-loopback']);
    cleanups.push(() => rig.close());

    const manifest = await fetch(`${rig.pageUrl}/manifest.webmanifest`);
    expect(manifest.headers.get('content-type')).toBe('application/manifest+json');
    expect(((await manifest.json()) as { start_url: string }).start_url).toBe('/');
    const sw = await fetch(`${rig.pageUrl}/sw.js`);
    expect(sw.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(sw.headers.get('cache-control')).toBe('no-store');

    const alice = await rig.signedIn('alice');
    await alice.context.grantPermissions(['notifications'], { origin: rig.pageUrl });
    const state = await withTimeout(
      alice.page.evaluate(async () => (await navigator.serviceWorker.ready).active?.scriptURL),
      15_000,
      'the service worker to be ready',
    );
    expect(state).toBe(`${rig.pageUrl}/sw.js`);
    await expect.poll(() => alice.page.getByLabel('Push to this device').count(), POLL).toBe(1);

    // Her own webhook, from the page's settings: the secret shown once, the hook listed.
    await alice.page.getByText('Webhooks').click();
    await alice.page.getByLabel('Webhook URL').fill('http://example.com/hook');
    await alice.page.getByRole('button', { name: 'Add webhook' }).click();
    await alice.page
      .getByRole('alert')
      .getByText(/must be https/)
      .waitFor();
    await alice.page.getByLabel('Webhook URL').fill(`${receiver.url}/alice`);
    await alice.page.getByLabel('Webhook format').selectOption('slack');
    await alice.page.getByRole('button', { name: 'Add webhook' }).click();
    expect(await alice.page.getByTestId('webhook-secret').locator('code').textContent()).toMatch(/^[\w-]{43}$/);
    await alice.page.getByText(`${receiver.url}/alice`).waitFor();
    await alice.page.getByText('Webhooks').click(); // closed again

    await startSession(alice.page);
    await sendPrompt(alice.page, 'create a file');
    await waitFor(() => receiver.posts.some((p) => p.body.includes('"permission_request"')), 20_000, 'the prompt at the webhook');
    const { may_answer: _, ...event } = JSON.parse(
      receiver.posts.find((p) => p.body.includes('"permission_request"'))!.body,
    ) as AttentionEvent;

    await deliverPush(alice.page, rig.pageUrl, { ...event, answerable: true });
    await expect
      .poll(() => notifications(alice.page), POLL)
      .toEqual([{ title: 'Permission needed: local', tag: event.id, body: event.summary, actions: ['allow', 'deny'] }]);

    const victor = await rig.signedIn('victor', { scopes: ['view'] });
    await victor.context.grantPermissions(['notifications'], { origin: rig.pageUrl });
    await withTimeout(
      victor.page.evaluate(async () => (await navigator.serviceWorker.ready).active?.state),
      15_000,
      "victor's worker",
    );
    await expect.poll(() => victor.page.evaluate(() => navigator.serviceWorker.controller !== null), POLL).toBe(true); // clients.claim()
    await deliverPush(victor.page, rig.pageUrl, { ...event, answerable: false });
    await expect
      .poll(() => notifications(victor.page), POLL)
      .toEqual([{ title: 'Permission needed: local', tag: event.id, body: event.summary, actions: [] }]);
    // A viewer's Allow, were it sent anyway, is taken by nobody: the worker sends none without the action.
    expect(await click(victor.page, event.id, 'allow')).toEqual({ ok: true, message: 'opened the session' });

    expect(await click(alice.page, event.id, 'allow')).toEqual({ ok: true, message: 'Allowed' });
    await alice.page.getByText('allowed by alice').waitFor();
    await waitFor(() => receiver.posts.some((p) => p.body.includes('"turn_complete"')), 20_000, 'the turn to finish');

    // The same notification again (a second device, say), answered late: refused, and said so.
    await deliverPush(alice.page, rig.pageUrl, { ...event, answerable: true });
    const late = await click(alice.page, event.id, 'deny');
    expect(late).toEqual({ ok: false, message: 'already answered: allow by alice' });
    await expect
      .poll(async () => (await notifications(alice.page)).find((n) => n.tag === `${event.id}:answer`)?.body, POLL)
      .toBe('already answered: allow by alice');
    expect(alice.errors).toEqual([]);
  }, 120_000);
});
