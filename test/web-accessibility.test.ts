import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { axeViolations, openFromDashboard, person, sendPrompt, signIn, startSession } from './support/browser.js';
import { startWebDemoRig, type WebDemoRig } from './support/web-demo-rig.js';

/** WCAG relative luminance of an sRGB colour. */
const luminance = (rgb: number[]) => {
  const [r, g, b] = rgb.map((c) => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
/** WCAG contrast ratio of two opaque colours (1 to 21). */
const contrast = (a: number[], b: number[]) => {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
};
/** `rgb(…)`/`rgba(…)` as a computed style gives it: [r, g, b, alpha]. */
const channels = (css: string) => {
  const m = /^rgba?\(([\d.]+), ([\d.]+), ([\d.]+)(?:, ([\d.]+))?\)$/.exec(css);
  if (!m) throw new Error(`not an rgb colour: ${css}`);
  return [Number(m[1]), Number(m[2]), Number(m[3]), m[4] === undefined ? 1 : Number(m[4])];
};

/** Roles and attributes that make a region live (its changes are read out by screen readers). */
const LIVE = '[aria-live]:not([aria-live=off]), [role=status], [role=log], [role=alert], [role=marquee], [role=timer]';

/** Issue 28, item 11: what a screen reader says, the session page's heading and focus, colour contrast, axe-core; demo engine, headless Chromium. */
describe('web page: accessibility', () => {
  let rig: WebDemoRig;
  beforeAll(async () => {
    rig = await startWebDemoRig('web-a11y');
  }, 60_000);
  afterAll(() => rig?.close());

  /** Starts recording every sentence the page's live regions get (what a screen reader would say). */
  const listen = (page: Page) =>
    page.evaluate((live) => {
      const w = window as unknown as { __said: string[] };
      w.__said = [];
      new MutationObserver((records) => {
        for (const r of records) {
          const el = r.target instanceof Element ? r.target : r.target.parentElement;
          const region = el?.closest(live);
          if (region) w.__said.push(region.textContent ?? '');
        }
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    }, LIVE);
  const said = (page: Page) => page.evaluate(() => (window as unknown as { __said: string[] }).__said);

  it('the transcript is not a live region: one small status region says an answer finished, a permission request and the link lost and back, never the streamed words', async () => {
    const alice = await rig.signedIn('alice');
    await startSession(alice.page);
    const liveAroundTranscript = await alice.page.locator('[data-testid=transcript]').evaluate((t, live) => {
      const found: string[] = [];
      for (let el: Element | null = t; el; el = el.parentElement) if (el.matches(live)) found.push(el.outerHTML.slice(0, 80));
      return [...found, ...[...t.querySelectorAll(live)].map((el) => el.outerHTML.slice(0, 80))];
    }, LIVE);
    expect(liveAroundTranscript).toEqual([]);
    await expect(alice.page.locator(LIVE).count()).resolves.toBe(1); // the announcer, nothing else
    await listen(alice.page);

    await sendPrompt(alice.page, 'a slow long answer please');
    await alice.page.locator('.md.streaming').filter({ hasText: ' 3,' }).waitFor();
    await alice.page.getByTestId('assistant-text').filter({ hasText: '39.' }).and(alice.page.locator('.md:not(.streaming)')).waitFor();
    await expect.poll(() => said(alice.page)).toContain('Answer finished.');

    await sendPrompt(alice.page, 'create a file');
    const card = alice.page.getByTestId('permission-card');
    await card.waitFor();
    await expect.poll(async () => (await said(alice.page)).at(-1)).toMatch(/^Permission needed: \w+\.$/);
    const saidBeforeDeny = (await said(alice.page)).length;
    await card.getByRole('button', { name: 'Deny', exact: true }).click();
    await alice.page.getByTestId('prompt-decided').waitFor();
    // The denied turn's end is said before the link goes (else it may come with the resume, after "again").
    await expect.poll(async () => (await said(alice.page)).length, { timeout: 20_000 }).toBeGreaterThan(saidBeforeDeny);

    await alice.context.setOffline(true);
    await alice.page.getByTestId('link-banner').waitFor();
    await expect.poll(async () => (await said(alice.page)).at(-1)).toMatch(/^(Connection to the gateway lost|Cannot reach the gateway)/);
    await alice.context.setOffline(false);
    await alice.page.getByTestId('link-banner').waitFor({ state: 'detached' });
    await expect.poll(async () => (await said(alice.page)).at(-1)).toBe('Connected to the gateway again.');

    const sentences = await said(alice.page);
    expect(sentences.filter((s) => /Counting|\d,/.test(s))).toEqual([]); // no streamed word was read out
    expect(sentences.length).toBeLessThan(12); // a few sentences, not a stream
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  }, 60_000);

  it('the session page has a heading naming the session, and opening a session moves the focus to it, not to the body', async () => {
    const focused = (page: Page) =>
      page.evaluate(
        () => `${document.activeElement?.tagName.toLowerCase()}${document.activeElement?.id ? `#${document.activeElement.id}` : ''}`,
      );
    const alice = await rig.signedIn('alice');
    const id = await startSession(alice.page);
    const heading = alice.page.getByRole('heading', { level: 1 });
    await expect(heading.textContent()).resolves.toMatch(/^Session on \S+/);
    await expect.poll(() => focused(alice.page)).toBe('h1'); // from the start form
    const agent = (await heading.textContent())!.replace(/^Session on /, '').split(' ')[0];

    for (const how of ['Open', 'Watch'] as const) {
      const bob = await rig.signedIn('bob');
      await openFromDashboard(bob.page, id, how);
      const h1 = bob.page.getByRole('heading', { level: 1, name: new RegExp(`^Session on ${agent}`) });
      await h1.waitFor();
      await expect.poll(() => focused(bob.page)).toBe('h1');
      await bob.page.reload(); // from the address (#session=…)
      await h1.waitFor();
      await expect.poll(() => focused(bob.page)).toBe('h1');
      await bob.context.close();
    }
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  }, 60_000);

  it('the attention badge ("N waiting") has text contrast of at least 4.5:1 (WCAG AA), dark and light', async () => {
    const alice = await rig.signedIn('alice');
    const id = await startSession(alice.page);
    await sendPrompt(alice.page, 'create a file');
    await alice.page.getByTestId('permission-card').waitFor();
    const ratios: Record<string, number> = {};
    for (const dark of [true, false]) {
      const bob = await rig.signedIn('bob', { dark });
      const badge = bob.page.locator(`[data-session="${id}"] .badge`);
      await expect(badge.textContent()).resolves.toBe('1 waiting');
      const { color, background } = await badge.evaluate((b) => ({
        color: getComputedStyle(b).color,
        background: getComputedStyle(b).backgroundColor,
      }));
      const [fg, bg] = [channels(color), channels(background)];
      expect([fg[3], bg[3]]).toEqual([1, 1]); // opaque, so the ratio is what shows
      ratios[dark ? 'dark' : 'light'] = Math.round(contrast(fg, bg) * 100) / 100;
      await bob.context.close();
    }
    expect(ratios.dark).toBeGreaterThanOrEqual(4.5);
    expect(ratios.light).toBeGreaterThanOrEqual(4.5);
    await alice.page.getByTestId('permission-card').getByRole('button', { name: 'Deny', exact: true }).click();
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('axe-core finds no serious or critical accessibility violation: sign-in page, dashboard, a session with a permission card, a viewer, light and dark, 390 and 1280 px', async () => {
    const violations = axeViolations;
    const all: string[] = [];
    const owner = await rig.signedIn('alice');
    const id = await startSession(owner.page);
    await sendPrompt(owner.page, 'create a file');
    await owner.page.getByTestId('permission-card').waitFor();
    // Each view checked light, then dark: the theme is CSS `prefers-color-scheme` only, so the
    // same page switched with emulateMedia is what a dark browser loads.
    const lightAndDark = async (page: Page, view: string) => {
      for (const dark of [false, true]) {
        await page.emulateMedia({ colorScheme: dark ? 'dark' : 'light' });
        all.push(...(await violations(page, `${view} ${page.viewportSize()?.width}${dark ? ' dark' : ''}`)));
      }
    };
    for (const width of [390, 1280]) {
      const out = await person(rig.browser, { width });
      await out.page.goto(rig.pageUrl);
      await out.page.getByRole('heading', { level: 1, name: 'Tether' }).waitFor(); // signed out: the sign-in page
      await lightAndDark(out.page, 'sign-in');
      await out.context.close();
      const p = await person(rig.browser, { width });
      await signIn(p.page, await rig.linkFor('bob'));
      await p.page.locator(`[data-session="${id}"]`).waitFor();
      await lightAndDark(p.page, 'dashboard');
      await openFromDashboard(p.page, id, 'Open');
      await p.page.getByTestId('permission-card').waitFor();
      await lightAndDark(p.page, 'session');
      await p.context.close();
    }
    const viewer = await rig.signedIn('victor');
    await openFromDashboard(viewer.page, id, 'Watch');
    await viewer.page.getByTestId('permission-card').waitFor();
    all.push(...(await violations(viewer.page, 'viewer')));
    expect(all).toEqual([]);
    await viewer.context.close();
    await owner.context.close();
  }, 90_000);
});
