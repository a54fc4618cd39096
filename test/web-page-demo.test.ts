import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEARTBEAT_DEFAULTS } from '../core/link/heartbeat.js';
import { SCREENSHOT_DIR, openFromDashboard, person, sendPrompt, signIn, startSession } from './support/browser.js';
import { startWebDemoRig, type WebDemoRig } from './support/web-demo-rig.js';

const COUNTED = `Counting slowly:${Array.from({ length: 39 }, (_, i) => ` ${i + 1}`).join(',')}.`;

/** The web page's behaviour in the issue-28 cases (sessions, their wording, the link), against `tether up` with the demo engine, in headless Chromium (layout and accessibility: web-page-demo-layout.test.ts). */
describe('web page (demo engine): issue 28', () => {
  let rig: WebDemoRig;
  let browser: Browser;
  let pageUrl: string;
  const linkFor = (sub: string, scopes?: string[]) => rig.linkFor(sub, scopes);
  const signedIn = (sub: string, opts: { width?: number; scopes?: string[] } = {}) => rig.signedIn(sub, opts);

  beforeAll(async () => {
    rig = await startWebDemoRig('web28');
    ({ browser, pageUrl } = rig);
  }, 60_000);
  afterAll(() => rig?.close());

  it('a prompt sent while an answer streams: the answer finishes where it started, once; the prompt waits below as queued, then gets its own answer', async () => {
    const alice = await signedIn('alice');
    const id = await startSession(alice.page);
    const bob = await signedIn('bob');
    await openFromDashboard(bob.page, id, 'Open');
    await sendPrompt(alice.page, 'a slow long answer please');
    await bob.page.locator('.md.streaming').filter({ hasText: ' 3,' }).waitFor();
    await sendPrompt(bob.page, 'hello from bob');
    const queued = (p: typeof alice.page) => p.getByTestId('prompt').filter({ hasText: 'hello from bob' }).getByTestId('queued');
    await Promise.all([alice.page, bob.page].map((p) => queued(p).waitFor())); // said while the answer above streams
    for (const p of [alice.page, bob.page]) {
      await p.getByText('You said: hello from bob').waitFor();
      expect(await queued(p).count()).toBe(0);
      expect(await p.locator('.md.streaming').count()).toBe(0); // no cursor left running
      const texts = (await p.getByTestId('assistant-text').allTextContents()).map((t) => t.trim());
      expect(texts).toEqual([COUNTED, 'Hello from the Tether demo engine. You said: hello from bob']); // the count once, above bob's prompt
      const order = await p.locator('[data-testid=prompt], [data-testid=assistant-text]').allTextContents();
      expect(order.map((t) => t.trim().slice(0, 24).trim())).toEqual([
        'alicea slow long answer',
        COUNTED.slice(0, 24),
        'bobhello from bob',
        'Hello from the Tether de',
      ]);
    }
    expect(alice.errors).toEqual([]);
    expect(bob.errors).toEqual([]);
    await bob.context.close();
    await alice.context.close();
  });

  it('reloading a tab whose address names a session that is gone: the dashboard with a plain message, still signed in', async () => {
    const alice = await signedIn('alice');
    await alice.page.goto(`${pageUrl}/#session=s_gone_long_ago`);
    await alice.page.reload();
    await alice.page.getByRole('alert').filter({ hasText: 'The session in this address is not on the gateway any more' }).waitFor();
    await alice.page.getByRole('button', { name: 'Start session' }).waitFor();
    await expect(alice.page.getByTestId('principal').textContent()).resolves.toBe('alice');
    expect((await alice.context.cookies()).map((c) => c.name)).toContain('__Host-tether_session'); // the browser's sign-in, for every tab
    expect(alice.page.url()).not.toContain('#session=');
    await alice.page.reload(); // and the sign-in lasts
    await expect(alice.page.getByTestId('principal').textContent()).resolves.toBe('alice');
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('an interrupt and a stop say what happened and who did it, to every member, not as errors', async () => {
    const alice = await signedIn('alice');
    const id = await startSession(alice.page);
    const bob = await signedIn('bob');
    await openFromDashboard(bob.page, id, 'Watch');
    await sendPrompt(alice.page, 'a slow long answer please');
    await bob.page.locator('.md.streaming').waitFor();
    await alice.page.getByRole('button', { name: 'Interrupt' }).click();
    for (const p of [alice.page, bob.page])
      await p.locator('[data-testid=note].info').filter({ hasText: 'alice interrupted the turn.' }).waitFor();
    alice.page.once('dialog', (d) => void d.accept());
    await alice.page.getByRole('button', { name: 'Stop session' }).click();
    for (const p of [alice.page, bob.page]) {
      await p.locator('[data-testid=note].info').filter({ hasText: 'alice stopped the session.' }).waitFor();
      const notes = await p.getByTestId('note').allTextContents();
      expect(notes.filter((n) => /Turn ended|Engine exited|error|\[/.test(n))).toEqual([]);
    }
    expect(alice.errors).toEqual([]);
    expect(bob.errors).toEqual([]);
    await bob.context.close();
    await alice.context.close();
  });

  it('the loser of a permission race is told their answer came second', async () => {
    const alice = await signedIn('alice');
    const id = await startSession(alice.page);
    const bob = await signedIn('bob');
    await openFromDashboard(bob.page, id, 'Open');
    await sendPrompt(alice.page, 'create a file');
    await bob.page.getByTestId('permission-card').waitFor();
    // Bob answers while his link is away; alice answers meanwhile; his answer arrives second.
    await bob.context.setOffline(true);
    await bob.page.getByTestId('link-banner').waitFor();
    await bob.page.getByTestId('permission-card').getByRole('button', { name: 'Deny', exact: true }).click();
    await alice.page.getByTestId('permission-card').getByRole('button', { name: 'Allow', exact: true }).click();
    await alice.page.getByText('Done: the command ran.').waitFor();
    await bob.context.setOffline(false);
    await bob.page
      .getByTestId('prompt-decided')
      .getByTestId('late-answer')
      .filter({ hasText: 'Your answer came second and was not used: alice had already answered.' })
      .waitFor();
    await expect(bob.page.getByTestId('prompt-decided').textContent()).resolves.toContain('Bash: allowed by alice');
    expect(await alice.page.getByTestId('late-answer').count()).toBe(0);
    expect(bob.errors).toEqual([]);
    await bob.context.close();
    await alice.context.close();
  });

  it('a sign-in the network cuts off says so in words, not "Failed to fetch"', async () => {
    const p = await person(browser);
    const link = await linkFor('alice');
    await p.page.route('**/v1/login', (r) => (r.request().method() === 'POST' ? r.abort('internetdisconnected') : r.continue()));
    await p.page.goto(link);
    await p.page.getByRole('alert').filter({ hasText: 'Sign-in failed: the network is unreachable' }).waitFor();
    expect(await p.page.locator('body').textContent()).not.toMatch(/Failed to fetch|TypeError/);
    expect(p.errors).toEqual([]);
    await p.context.close();
  });

  it('no internal words on the page: the session state and a network failure read as sentences', async () => {
    const alice = await signedIn('alice');
    await startSession(alice.page);
    await sendPrompt(alice.page, 'create a file');
    await alice.page.getByTestId('permission-card').waitFor();
    await alice.page.getByTestId('session-state').filter({ hasText: 'waiting for an answer' }).waitFor();
    expect(await alice.page.locator('body').textContent()).not.toMatch(/requires_action|_/);
    await alice.context.setOffline(true);
    const banner = alice.page.getByTestId('link-banner');
    await expect.poll(() => banner.textContent(), { timeout: 10_000 }).toContain('retrying'); // a reconnect attempt failed
    expect(await banner.textContent()).not.toMatch(/Failed to fetch|TypeError|\(\d+\)/);
    await alice.context.setOffline(false);
    await banner.waitFor({ state: 'detached' });
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('controls are offered only where they can work: a view-only sign-in cannot start or open, an ended session takes no input', async () => {
    const alice = await signedIn('alice');
    const id = await startSession(alice.page);
    const carol = await signedIn('carol', { scopes: ['view'] });
    const row = carol.page.locator(`[data-session="${id}"]`);
    await row.getByRole('button', { name: /read-only/ }).waitFor();
    expect(await row.getByRole('button', { name: /as a controller/ }).count()).toBe(0);
    expect(await carol.page.getByRole('button', { name: 'Start session' }).count()).toBe(0);
    await carol.page.getByTestId('cannot-start').waitFor();
    // The owner is offered to hand control to a viewer whose sign-in allows it, not to carol.
    await openFromDashboard(carol.page, id, 'Watch');
    const victor = await signedIn('victor');
    await openFromDashboard(victor.page, id, 'Watch');
    const handover = alice.page.getByRole('list', { name: 'Hand control' });
    await handover.getByRole('button', { name: 'Let victor control' }).waitFor();
    await handover.getByText('carol (viewer)').waitFor();
    expect(await handover.getByRole('button', { name: 'Let carol control' }).count()).toBe(0);
    await victor.context.close();

    // The agent (tether up without --allow-bypass-permissions) refuses bypassPermissions: the start form does not offer it.
    const startModes = await startFormModes();
    expect(startModes).toContain('plan');
    expect(startModes).not.toContain('bypassPermissions');
    // The engine refuses to switch into bypassPermissions unless it started in it: not offered.
    const modes = await alice.page.getByLabel('Permission mode').locator('option').allTextContents();
    expect(modes).toContain('acceptEdits');
    expect(modes).not.toContain('bypassPermissions');
    alice.page.once('dialog', (d) => void d.accept());
    await alice.page.getByRole('button', { name: 'Stop session' }).click();
    await alice.page.getByTestId('ended').waitFor();
    expect(await alice.page.locator('#prompt').count()).toBe(0);
    expect(await alice.page.locator('main.session select').count()).toBe(0); // the header's webhook settings are the person's, not the session's
    for (const name of ['Interrupt', 'Send', 'Stop session'])
      expect(await alice.page.getByRole('button', { name, exact: true }).count()).toBe(0);
    expect(alice.errors).toEqual([]);
    expect(carol.errors).toEqual([]);
    await carol.context.close();
    await alice.context.close();
  });

  it('the owner hands the session to a member (issue 32): roles swap on both pages and the transcript says who handed it to whom', async () => {
    const alice = await signedIn('alice');
    const id = await startSession(alice.page);
    const victor = await signedIn('victor');
    await openFromDashboard(victor.page, id, 'Open');
    const handover = alice.page.getByRole('list', { name: 'Hand control' });
    await handover.getByRole('button', { name: 'Make victor the owner' }).click();
    await expect.poll(() => victor.page.getByTestId('role').textContent(), { timeout: 10_000 }).toBe('owner');
    await expect.poll(() => alice.page.getByTestId('role').textContent(), { timeout: 10_000 }).toBe('controller');
    await alice.page.getByText('alice handed the session to victor.').waitFor();
    expect(alice.errors).toEqual([]);
    expect(victor.errors).toEqual([]);
    await victor.context.close();
    await alice.context.close();
  });

  /** The permission modes a fresh page of alice's offers on the dashboard's start form. */
  const startFormModes = async () => {
    const p = await signedIn('alice');
    await p.page.locator('select[name=permission_mode] option').first().waitFor({ state: 'attached' });
    await expect.poll(() => p.page.locator('select[name=agent] option').count()).toBe(1); // the agent list has arrived
    const modes = await p.page.locator('select[name=permission_mode] option').allTextContents();
    await p.context.close();
    return modes;
  };

  it('the link banner is in sight when the page is scrolled to the bottom', async () => {
    const alice = await signedIn('alice', { width: 390 });
    await startSession(alice.page);
    for (let i = 1; i <= 6; i++) {
      await sendPrompt(alice.page, `filler ${i}`);
      await alice.page.getByText(`You said: filler ${i}`).waitFor();
    }
    await alice.page.mouse.wheel(0, 10_000);
    await expect.poll(() => alice.page.evaluate(() => window.scrollY)).toBeGreaterThan(200);
    // At the bottom, where everyone reads, a lost link is in sight.
    await alice.context.setOffline(true);
    const banner = alice.page.getByTestId('link-banner');
    await banner.waitFor();
    const box = (await banner.boundingBox())!;
    expect(box.y).toBeGreaterThanOrEqual(0);
    expect(box.y + box.height).toBeLessThanOrEqual(844);
    await alice.page.screenshot({ path: `${SCREENSHOT_DIR}link-down-bottom-390-light.png` });
    await alice.context.setOffline(false);
    await banner.waitFor({ state: 'detached' });
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('a link that stops carrying bytes without closing is noticed within the heartbeat bound, shown in sight (390 and 1280 px, light and dark), and resumed', async () => {
    // The two widths at once; each shot light, then dark (the theme is CSS only: emulateMedia).
    const stallAndResume = async (width: number) => {
      const alice = await person(browser, { width });
      // The page's clock runs as usual but can jump: the test skips the heartbeat bound instead of waiting it out.
      await alice.page.clock.install();
      // Every WebSocket of the page goes through this relay; stalled, it holds every message both ways and closes nothing.
      let stalled = false;
      await alice.page.routeWebSocket(/\/v1\/connect/, (ws) => {
        if (stalled) return; // a new socket "opens" and then hears nothing, like the old one
        const server = ws.connectToServer();
        ws.onMessage((m) => void (stalled || server.send(m)));
        server.onMessage((m) => void (stalled || ws.send(m)));
      });
      await signIn(alice.page, await linkFor('alice'));
      await startSession(alice.page);
      await sendPrompt(alice.page, 'before the stall');
      await alice.page.getByText('You said: before the stall').waitFor();
      stalled = true;
      const silent = alice.page.getByTestId('link-banner').filter({ hasText: 'went silent' });
      // Silent for the ping interval: the page pings, and nothing is declared lost yet.
      await alice.page.clock.fastForward(HEARTBEAT_DEFAULTS.intervalMs);
      await expect(silent.count()).resolves.toBe(0);
      // The ping's timeout passes unanswered too (the whole heartbeat bound): now it is.
      await alice.page.clock.fastForward(HEARTBEAT_DEFAULTS.timeoutMs);
      await silent.waitFor({ timeout: 5_000 });
      // What the screenshot shows: the banner (the reason, or the retry after it) in the viewport, the page no wider than it.
      const banner = alice.page.getByTestId('link-banner');
      await expect(banner.textContent()).resolves.toMatch(/went silent|Reconnecting and resuming|Still no connection/);
      const viewport = alice.page.viewportSize()!;
      const box = (await banner.boundingBox())!;
      expect([box.x >= 0, box.y >= 0, box.x + box.width <= viewport.width, box.y + box.height <= viewport.height]).toEqual([
        true,
        true,
        true,
        true,
      ]);
      await expect(banner.evaluate((b) => b.scrollWidth <= b.clientWidth)).resolves.toBe(true); // its words wrap, none cut off
      await expect(alice.page.evaluate(() => document.documentElement.scrollWidth)).resolves.toBeLessThanOrEqual(viewport.width);
      await alice.page.screenshot({ path: `${SCREENSHOT_DIR}link-stalled-${width}-light.png` });
      await alice.page.emulateMedia({ colorScheme: 'dark' });
      await alice.page.screenshot({ path: `${SCREENSHOT_DIR}link-stalled-${width}-dark.png` });
      stalled = false;
      await alice.page.getByTestId('link-banner').waitFor({ state: 'detached', timeout: 30_000 });
      await sendPrompt(alice.page, 'after the stall');
      await alice.page.getByText('You said: after the stall').waitFor();
      expect(alice.errors).toEqual([]);
      await alice.context.close();
    };
    await Promise.all([1280, 390].map(stallAndResume));
  }, 90_000);
});
