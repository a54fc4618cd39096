import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './support/browser.js';
import { hasTool } from './support/tools.js';

const STORE = fileURLToPath(new URL('../client/web/src/store.ts', import.meta.url));

/** Changes a paced store gets, each in a task of its own, as `session.frame` notifications arrive. */
const CHANGES = 300;

/**
 * The page's store hooks (client/web/src/store.ts) in Chromium with Preact: a component
 * subscribes in an effect, after its render, so a change in between (the engine's model list
 * answered while the session page was mounting) must still reach the screen. The race showed in
 * the full suite as a session page with no model picker (web-session-header, ~1 run in 3).
 * A store paced per animation frame (the session's view) draws a burst of changes a few times,
 * not once per change, and still draws on a page that gets no animation frames.
 */
describe.skipIf(!hasTool('chromium'))("the web page's store hooks", () => {
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    // A component per hook, rendered, then the store changed before Preact runs the effects.
    const entry = `
      import { h, render } from 'preact';
      import { perAnimationFrame, Store, useStore, useStoreSelect } from ${JSON.stringify(STORE)};
      const plain = new Store({ n: 1 });
      const picked = new Store({ n: 1, other: 'x' });
      const Plain = () => h('span', { id: 'plain' }, String(useStore(plain).n));
      const Picked = () => h('span', { id: 'picked' }, String(useStoreSelect(picked, (v) => v.n)));
      render(h('div', null, h(Plain), h(Picked)), document.getElementById('root'));
      plain.update({ n: 2 });
      picked.update({ n: 2 });
      window.later = () => { plain.update({ n: 3 }); picked.update({ n: 3 }); };
      const paced = new Store({ n: 0 }, perAnimationFrame);
      window.renders = 0;
      const Paced = () => { window.renders++; return h('span', { id: 'paced' }, String(useStore(paced).n)); };
      render(h(Paced), document.getElementById('paced-root'));
      // One change per task (a MessageChannel message, as a WebSocket message is its own task).
      window.burst = (count) => new Promise((done) => {
        const ch = new MessageChannel();
        let left = count;
        ch.port1.onmessage = () => {
          paced.update({ n: paced.get().n + 1 });
          if (--left > 0) ch.port2.postMessage(0); else done();
        };
        ch.port2.postMessage(0);
      });
      window.setPaced = (n) => paced.update({ n });
    `;
    const out = await build({
      stdin: { contents: entry, resolveDir: fileURLToPath(new URL('.', import.meta.url)), loader: 'ts' },
      bundle: true,
      write: false,
      format: 'iife',
      target: ['es2022'],
      logLevel: 'silent',
    });
    browser = await launchChromium();
    page = await browser.newPage();
    await page.setContent('<div id="root"></div><div id="paced-root"></div>');
    await page.addScriptTag({ content: out.outputFiles[0].text });
  }, 30_000);
  afterAll(() => browser?.close());

  it('useStore and useStoreSelect show a change made between the render and the subscription, and every change after', async () => {
    await expect.poll(() => page.locator('#plain').textContent(), { timeout: 5_000 }).toBe('2');
    await expect.poll(() => page.locator('#picked').textContent(), { timeout: 5_000 }).toBe('2');
    await page.evaluate(() => (window as unknown as { later: () => void }).later());
    await expect.poll(() => page.locator('#plain').textContent(), { timeout: 5_000 }).toBe('3');
    await expect.poll(() => page.locator('#picked').textContent(), { timeout: 5_000 }).toBe('3');
  });

  it(`a store paced per animation frame draws a burst of ${CHANGES} changes, one per task, in a few renders, ending on the last`, async () => {
    await page.locator('#paced').filter({ hasText: '0' }).waitFor({ timeout: 5_000 });
    const renders = () => page.evaluate(() => (window as unknown as { renders: number }).renders);
    const before = await renders();
    await page.evaluate((n) => (window as unknown as { burst: (n: number) => Promise<void> }).burst(n), CHANGES);
    await expect.poll(() => page.locator('#paced').textContent(), { timeout: 5_000 }).toBe(String(CHANGES));
    // Unpaced, Preact renders once per task here: CHANGES renders. Paced, a burst of tasks a
    // few ms long spans a handful of animation frames.
    const drawn = (await renders()) - before;
    expect(drawn).toBeGreaterThan(0);
    expect(drawn).toBeLessThan(CHANGES / 4);
  });

  it('a paced store still draws a change on a page that gets no animation frames (hidden), on its timer, leaving no frame callback queued', async () => {
    await page.evaluate(() => {
      // As a hidden page: animation frame callbacks are queued and never run.
      const w = window as unknown as { queued: Set<number>; setPaced: (n: number) => void };
      w.queued = new Set();
      let next = 1;
      window.requestAnimationFrame = () => (w.queued.add(next), next++);
      window.cancelAnimationFrame = (id) => void w.queued.delete(id);
      w.setPaced(-1);
    });
    await expect.poll(() => page.locator('#paced').textContent(), { timeout: 5_000 }).toBe('-1');
    for (const n of [-2, -3, -4]) {
      await page.evaluate((v) => (window as unknown as { setPaced: (n: number) => void }).setPaced(v), n);
      await expect.poll(() => page.locator('#paced').textContent(), { timeout: 5_000 }).toBe(String(n));
    }
    // Each change's timer cancelled its frame callback: nothing waits for the page to be shown.
    expect(await page.evaluate(() => (window as unknown as { queued: Set<number> }).queued.size)).toBe(0);
  });
});
