import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pageRunning } from './support/browser.js';
import { hasTool } from './support/tools.js';

const STORE = fileURLToPath(new URL('../client/web/src/store.ts', import.meta.url));
const PER_FRAME = fileURLToPath(new URL('../client/web/src/render-per-frame.ts', import.meta.url));

/** Changes the page makes, each in a task of its own, as `session.frame` notifications arrive. */
const CHANGES = 300;

/**
 * The page renders what changed once per animation frame (client/web/src/render-per-frame.ts):
 * a burst of changes, each in its own task as frames arrive over the WebSocket, is drawn in a
 * few renders, not one per change (Preact's default, which diffed a 2,000-turn transcript once per
 * frame of a live burst); and a page that gets no animation frames still renders.
 */
describe.skipIf(!hasTool('chromium'))("the web page's rendering, once per animation frame", () => {
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    const entry = `
      import { h, render } from 'preact';
      import { Store, useStore } from ${JSON.stringify(STORE)};
      import { renderOncePerFrame } from ${JSON.stringify(PER_FRAME)};
      renderOncePerFrame();
      const store = new Store({ n: 0 });
      window.renders = 0;
      const Shown = () => { window.renders++; return h('span', { id: 'n' }, String(useStore(store).n)); };
      render(h(Shown), document.getElementById('root'));
      // One change per task (a MessageChannel message, as a WebSocket message is its own task).
      window.burst = (count) => new Promise((done) => {
        const ch = new MessageChannel();
        let left = count;
        ch.port1.onmessage = () => {
          store.update({ n: store.get().n + 1 });
          if (--left > 0) ch.port2.postMessage(0); else done();
        };
        ch.port2.postMessage(0);
      });
      window.set = (n) => store.update({ n });
    `;
    ({ browser, page } = await pageRunning(entry));
    await page.locator('#n').filter({ hasText: '0' }).waitFor({ timeout: 5_000 });
  }, 30_000);
  afterAll(() => browser?.close());

  it(`a burst of ${CHANGES} changes, one per task, is drawn in a few renders and ends on the last`, async () => {
    const before = await page.evaluate(() => (window as unknown as { renders: number }).renders);
    await page.evaluate((n) => (window as unknown as { burst: (n: number) => Promise<void> }).burst(n), CHANGES);
    await expect.poll(() => page.locator('#n').textContent(), { timeout: 5_000 }).toBe(String(CHANGES));
    const renders = (await page.evaluate(() => (window as unknown as { renders: number }).renders)) - before;
    // Preact's default renders once per task here: CHANGES renders. Once per animation frame,
    // a burst of tasks a few ms long spans a handful of frames.
    expect(renders).toBeGreaterThan(0);
    expect(renders).toBeLessThan(CHANGES / 4);
  });

  it('a page that gets no animation frames (hidden) still renders a change, on the timer', async () => {
    await page.evaluate(() => {
      window.requestAnimationFrame = () => 0; // as a hidden page: no animation frame comes
      (window as unknown as { set: (n: number) => void }).set(-1);
    });
    await expect.poll(() => page.locator('#n').textContent(), { timeout: 5_000 }).toBe('-1');
  });
});
