import type { Browser } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { openFromDashboard, SCREENSHOT_DIR, screenshots, sendPrompt, startSession } from './support/browser.js';
import { webDemoRig } from './support/web-demo-rig.js';

/** The web page's layout and Markdown in the issue-28 cases (accessibility: web-accessibility.test.ts), against `tether up` with the demo engine, in headless Chromium (the rest: web-page-demo.test.ts). */
describe('web page (demo engine): issue 28, layout and Markdown', () => {
  const rig = webDemoRig();
  const { linkFor, signedIn } = rig;
  let browser: Browser, pageUrl: string; // the rig's, once it has started
  beforeAll(() => void ({ browser, pageUrl } = rig));

  it('on a 390 px phone a wide table, a long URL and an unbroken line scroll in their own boxes: the page stays the viewport wide, Send can be tapped', async () => {
    const table = `|${'a'.repeat(60)}|${'b'.repeat(60)}|\n|-|-|\n|c|d|`;
    const prompt = `table:\n\n${table}\n\nhttps://example.com/${'p'.repeat(150)}`;
    for (const width of [390, 1280]) {
      const alice = await signedIn('alice', { width });
      await startSession(alice.page);
      await sendPrompt(alice.page, prompt);
      await alice.page.locator('[data-testid=assistant-text]:not(.streaming) table').waitFor();
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
    const files = await screenshots(
      browser,
      'wide-content',
      () => linkFor('alice'),
      async (page) => {
        await startSession(page);
        await sendPrompt(page, prompt);
        await page.locator('[data-testid=assistant-text]:not(.streaming) table').waitFor();
      },
    );
    expect(files).toHaveLength(4);
  }, 60_000);

  it('on a 390 px phone every tap target is at least 44 px', async () => {
    const alice = await signedIn('alice', { width: 390 });
    const small = async () =>
      alice.page.evaluate(() =>
        [...document.querySelectorAll<HTMLElement>('button, select, input, textarea, summary, a[href]')]
          .filter((el) => el.offsetParent !== null && !el.closest('.sr-only'))
          .map((el) => ({
            el: `${el.tagName.toLowerCase()} ${(el.textContent || el.getAttribute('aria-label') || el.getAttribute('name') || '').trim().slice(0, 30)}`,
            ...el.getBoundingClientRect().toJSON(),
          }))
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
    await expect
      .poll(() => alice.page.evaluate(() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48))
      .toBe(true);
    expect(await jump.count()).toBe(0);

    expect(alice.errors).toEqual([]);
    await bob.context.close();
    await alice.context.close();
  });

  it('markdown reads well: task lists, table borders, a blockquote bar, a copy button on code', async () => {
    const alice = await signedIn('alice');
    await alice.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: pageUrl });
    await startSession(alice.page);
    await sendPrompt(alice.page, 'md:\n\n- [x] done\n- [ ] todo\n\n> quoted\n\n|a|b|\n|-|-|\n|1|2|\n\n```\ncode here\n```');
    const md = alice.page.getByTestId('assistant-text').filter({ hasText: 'quoted' });
    await md.locator('.code-block').waitFor();
    await expect(md.locator('.task-box').evaluateAll((els) => els.map((e) => e.getAttribute('aria-label')))).resolves.toEqual([
      'done',
      'not done',
    ]);
    await expect(
      md
        .locator('td')
        .first()
        .evaluate((e) => getComputedStyle(e).borderTopWidth),
    ).resolves.toBe('1px');
    await expect(md.locator('blockquote').evaluate((e) => getComputedStyle(e).borderLeftWidth)).resolves.toBe('3px');
    await md.getByRole('button', { name: 'Copy' }).click();
    await md.getByRole('button', { name: 'Copied' }).waitFor();
    await expect(alice.page.evaluate(() => navigator.clipboard.readText())).resolves.toBe('code here');
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('a screenshot pass that fails leaves a screenshot of the page as it stood and names it in the error', async () => {
    const file = join(SCREENSHOT_DIR, 'failing-pass-1280-light-failed.png');
    rmSync(file, { force: true });
    const failing = screenshots(
      browser,
      'failing-pass',
      () => linkFor('alice'),
      async (page) => {
        await page.getByRole('button', { name: 'Start session' }).waitFor(); // the dashboard is there to be seen
        throw new Error('what the pass waited for never came');
      },
    );
    await expect(failing).rejects.toThrow(
      `screenshots(): the failing-pass-1280-light pass failed (Error: what the pass waited for never came); the page as it stood: ${file}`,
    );
    expect(existsSync(file)).toBe(true);
    rmSync(file);
  });
});
