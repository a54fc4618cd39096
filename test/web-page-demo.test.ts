import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEARTBEAT_DEFAULTS } from '../core/link/heartbeat.js';
import { SCREENSHOT_DIR, launchChromium, openFromDashboard, person, screenshots, sendPrompt, signIn, signInLinkFor, startSession } from './support/browser.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startTether, type Daemon } from './support/cli.js';

const COUNTED = `Counting slowly:${Array.from({ length: 39 }, (_, i) => ` ${i + 1}`).join(',')}.`;

/** The web page's behaviour in the issue-28 cases, against `tether up` with the demo engine, in headless Chromium. */
describe('web page (demo engine): issue 28', () => {
  let up: Daemon;
  let browser: Browser;
  let cwd: TempDir;
  let state: TempDir;
  let pageUrl: string;
  const linkFor = (sub: string, scopes?: string[]) => signInLinkFor(pageUrl, state.path, sub, scopes);
  const signedIn = async (sub: string, opts: { width?: number; scopes?: string[] } = {}) => {
    const p = await person(browser, opts);
    await p.page.goto(await linkFor(sub, opts.scopes));
    await p.page.getByTestId('principal').waitFor();
    return p;
  };

  beforeAll(async () => {
    cwd = makeTempDir('tether-web28-cwd-');
    state = makeTempDir('tether-web28-state-');
    up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', cwd.path, '--state-dir', state.path]);
    pageUrl = new URL((await up.line('sign-in: ')).split(' ')[1]).origin;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await up?.stop('SIGTERM');
    cwd?.cleanup();
    state?.cleanup();
  });

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
      expect(order.map((t) => t.trim().slice(0, 24).trim())).toEqual(['alicea slow long answer', COUNTED.slice(0, 24), 'bobhello from bob', 'Hello from the Tether de']);
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
    for (const p of [alice.page, bob.page]) await p.locator('[data-testid=note].info').filter({ hasText: 'alice interrupted the turn.' }).waitFor();
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
    await bob.page.getByTestId('prompt-decided').getByTestId('late-answer').filter({ hasText: 'Your answer came second and was not used: alice had already answered.' }).waitFor();
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
    expect(await alice.page.locator('select').count()).toBe(0);
    for (const name of ['Interrupt', 'Send', 'Stop session']) expect(await alice.page.getByRole('button', { name, exact: true }).count()).toBe(0);
    expect(alice.errors).toEqual([]);
    expect(carol.errors).toEqual([]);
    await carol.context.close();
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

  it('on a 390 px phone a wide table, a long URL and an unbroken line scroll in their own boxes: the page stays the viewport wide, Send can be tapped', async () => {
    const table = `|${'a'.repeat(60)}|${'b'.repeat(60)}|\n|-|-|\n|c|d|`;
    const prompt = `table:\n\n${table}\n\nhttps://example.com/${'p'.repeat(150)}`;
    for (const width of [390, 1280]) {
      const alice = await signedIn('alice', { width });
      await startSession(alice.page);
      await sendPrompt(alice.page, prompt);
      await alice.page.locator('[data-testid=assistant-text] table').waitFor();
      const viewport = alice.page.viewportSize()!;
      await expect(alice.page.evaluate(() => document.documentElement.scrollWidth)).resolves.toBeLessThanOrEqual(viewport.width);
      const tableBox = alice.page.locator('[data-testid=assistant-text] table');
      expect(await tableBox.evaluate((t) => t.scrollWidth > t.clientWidth)).toBe(true); // it scrolls, inside its box
      for (const sel of ['header.top', 'form.composer', '#prompt']) {
        const box = (await alice.page.locator(sel).boundingBox())!;
        expect([sel, box.x >= 0 && box.x + box.width <= viewport.width]).toEqual([sel, true]);
      }
      const send = (await alice.page.getByRole('button', { name: 'Send' }).boundingBox())!;
      expect(send.x + send.width).toBeLessThanOrEqual(viewport.width);
      await sendPrompt(alice.page, 'still here');
      await alice.page.getByText('You said: still here').waitFor();
      expect(alice.errors).toEqual([]);
      await alice.context.close();
    }
    const files = await screenshots(browser, 'wide-content', () => linkFor('alice'), async (page) => {
      await startSession(page);
      await sendPrompt(page, prompt);
      await page.locator('[data-testid=assistant-text] table').waitFor();
    });
    expect(files).toHaveLength(4);
  }, 60_000);

  it('on a 390 px phone every tap target is at least 44 px', async () => {
    const alice = await signedIn('alice', { width: 390 });
    const small = async () =>
      alice.page.evaluate(() =>
        [...document.querySelectorAll<HTMLElement>('button, select, input, textarea, summary, a[href]')]
          .filter((el) => el.offsetParent !== null && !el.closest('.sr-only'))
          .map((el) => ({ el: `${el.tagName.toLowerCase()} ${(el.textContent || el.getAttribute('aria-label') || el.getAttribute('name') || '').trim().slice(0, 30)}`, ...el.getBoundingClientRect().toJSON() }))
          .filter((b) => b.height < 44 || b.width < 44)
          .map((b) => `${b.el}: ${Math.round(b.width)}x${Math.round(b.height)}`),
      );
    await expect(small()).resolves.toEqual([]); // the dashboard
    await startSession(alice.page);
    await sendPrompt(alice.page, 'create a file');
    await alice.page.getByTestId('permission-card').waitFor();
    await expect(small()).resolves.toEqual([]); // a session with a permission card
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('scrolled up while an answer streams, the reader keeps their place and gets a jump to latest with a count', async () => {
    const alice = await signedIn('alice', { width: 390 });
    const id = await startSession(alice.page);
    const bob = await signedIn('bob');
    await openFromDashboard(bob.page, id, 'Open');
    for (let i = 1; i <= 6; i++) {
      await sendPrompt(alice.page, `filler ${i}`);
      await alice.page.getByText(`You said: filler ${i}`).waitFor();
    }
    const scrollY = () => alice.page.evaluate(() => window.scrollY);
    await sendPrompt(alice.page, 'a slow long answer please');
    await alice.page.locator('.md.streaming').waitFor();
    await alice.page.mouse.wheel(0, -5_000);
    // At the top, give or take what the browser's scroll anchoring adds when a row above the
    // view is measured or the header's meter appears (the content in view stays put).
    const NEAR_TOP = 60;
    await expect.poll(scrollY).toBeLessThan(NEAR_TOP);
    await sendPrompt(bob.page, 'and then this'); // bob's prompt, queued behind the answer: new below
    await alice.page.getByText('38, 39.').waitFor();
    expect(await scrollY()).toBeLessThan(NEAR_TOP); // still where the reader left it, not pulled to the bottom
    const jump = alice.page.getByTestId('jump-latest');
    await expect.poll(() => jump.textContent()).toMatch(/^Jump to latest \(\d+ new\)$/);
    await jump.click();
    await expect.poll(() => alice.page.evaluate(() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48)).toBe(true);
    expect(await jump.count()).toBe(0);

    expect(alice.errors).toEqual([]);
    await bob.context.close();
    await alice.context.close();
  });

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

  it('a link that stops carrying bytes without closing is noticed within the heartbeat bound, shown, and resumed', async () => {
    const alice = await person(browser);
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
    const stalledAt = Date.now();
    const bound = HEARTBEAT_DEFAULTS.intervalMs + HEARTBEAT_DEFAULTS.timeoutMs;
    await alice.page.getByTestId('link-banner').filter({ hasText: 'went silent' }).waitFor({ timeout: bound + 5_000 });
    expect(Date.now() - stalledAt).toBeLessThan(bound + 3_000);
    await alice.page.screenshot({ path: `${SCREENSHOT_DIR}link-stalled-1280-light.png` });
    stalled = false;
    await alice.page.getByTestId('link-banner').waitFor({ state: 'detached', timeout: 30_000 });
    await sendPrompt(alice.page, 'after the stall');
    await alice.page.getByText('You said: after the stall').waitFor();
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  }, 90_000);

  it('markdown reads well: task lists, table borders, a blockquote bar, a copy button on code', async () => {
    const alice = await signedIn('alice');
    await alice.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: pageUrl });
    await startSession(alice.page);
    await sendPrompt(alice.page, 'md:\n\n- [x] done\n- [ ] todo\n\n> quoted\n\n|a|b|\n|-|-|\n|1|2|\n\n```\ncode here\n```');
    const md = alice.page.getByTestId('assistant-text').filter({ hasText: 'quoted' });
    await md.locator('.code-block').waitFor();
    await expect(md.locator('.task-box').evaluateAll((els) => els.map((e) => e.getAttribute('aria-label')))).resolves.toEqual(['done', 'not done']);
    await expect(md.locator('td').first().evaluate((e) => getComputedStyle(e).borderTopWidth)).resolves.toBe('1px');
    await expect(md.locator('blockquote').evaluate((e) => getComputedStyle(e).borderLeftWidth)).resolves.toBe('3px');
    await md.getByRole('button', { name: 'Copy' }).click();
    await md.getByRole('button', { name: 'Copied' }).waitFor();
    await expect(alice.page.evaluate(() => navigator.clipboard.readText())).resolves.toBe('code here');
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('axe-core finds no serious or critical accessibility violation: dashboard, a session with a permission card, a viewer, light and dark, 390 and 1280 px', async () => {
    const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
    const violations = async (page: Page, where: string) => {
      await page.evaluate(axeSource); // through the debugger protocol: the page's CSP (script-src 'self') rightly refuses inline scripts
      const found = await page.evaluate(async () => {
        const axe = (window as unknown as { axe: { run: (o: unknown) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe;
        const r = await axe.run({ resultTypes: ['violations'] });
        return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
      });
      return found.map((f) => `${where}: ${f}`);
    };
    const all: string[] = [];
    const owner = await signedIn('alice');
    const id = await startSession(owner.page);
    await sendPrompt(owner.page, 'create a file');
    await owner.page.getByTestId('permission-card').waitFor();
    for (const width of [390, 1280]) {
      for (const dark of [false, true]) {
        const tag = `${width}${dark ? ' dark' : ''}`;
        const p = await person(browser, { width, dark });
        await signIn(p.page, await linkFor('bob'));
        await p.page.locator(`[data-session="${id}"]`).waitFor();
        all.push(...(await violations(p.page, `dashboard ${tag}`)));
        await openFromDashboard(p.page, id, 'Open');
        await p.page.getByTestId('permission-card').waitFor();
        all.push(...(await violations(p.page, `session ${tag}`)));
        await p.context.close();
      }
    }
    const viewer = await signedIn('victor');
    await openFromDashboard(viewer.page, id, 'Watch');
    await viewer.page.getByTestId('permission-card').waitFor();
    all.push(...(await violations(viewer.page, 'viewer')));
    expect(all).toEqual([]);
    await viewer.context.close();
    await owner.context.close();
  }, 90_000);
});
