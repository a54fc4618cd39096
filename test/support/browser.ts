/**
 * Headless Chromium for the web client's tests: Debian's /usr/bin/chromium driven by
 * playwright-core (never a downloaded browser), talking to 127.0.0.1 only. One browser for the
 * run (launchChromium); each person in a test gets a context (its own sessionStorage).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { text } from 'node:stream/consumers';
import { type Browser, type BrowserContext, chromium, type Download, type Page } from 'playwright-core';
import { expect, inject } from 'vitest';
import { signInUrl } from '../../bin/sign-in-link.js';
import { loadKeyFile } from '../../core/auth/keys.js';
import { mintLoginCode } from '../../core/auth/login-codes.js';
import { stateKeyPath } from '../../core/auth/state-dir.js';
import { CHROMIUM_LAUNCH, PAGE_TIMEOUT_MS } from './chromium-launch.js';

/** Where the tests write their screenshots (git-ignored). */
export const SCREENSHOT_DIR = fileURLToPath(new URL('../../test-output/screenshots/', import.meta.url));

/**
 * The run's Chromium (test/support/global-chromium.ts starts one for all files), or, under a
 * vitest configuration without that global setup, one of the file's own. Either way the file
 * closes it with browser.close(), which for the shared one closes the file's contexts only.
 */
export async function launchChromium(): Promise<Browser> {
  const broker = inject('chromiumBroker');
  if (!broker) return chromium.launch(CHROMIUM_LAUNCH);
  const res = await fetch(broker, { signal: AbortSignal.timeout(PAGE_TIMEOUT_MS) });
  const answer = await res.text();
  if (!res.ok) throw new Error(answer);
  return chromium.connect(answer, { timeout: PAGE_TIMEOUT_MS });
}

/** A person at a browser: a fresh context and one page. */
export async function person(
  browser: Browser,
  opts: { width?: number; dark?: boolean } = {},
): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const width = opts.width ?? 1280;
  const context = await browser.newContext({
    viewport: { width, height: width < 600 ? 844 : 900 },
    colorScheme: opts.dark ? 'dark' : 'light',
    acceptDownloads: true,
  });
  context.setDefaultTimeout(PAGE_TIMEOUT_MS);
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return { context, page, errors };
}

/** Opens a sign-in link and waits for the dashboard. */
export async function signIn(page: Page, link: string): Promise<void> {
  await page.goto(link);
  await page.getByRole('button', { name: 'Start session' }).waitFor();
  expect(page.url()).not.toContain('login='); // the code leaves the address bar at once
}

/** Starts a session from the dashboard form and waits for its composer. */
export async function startSession(page: Page, opts: { cwd?: string; mode?: string; engine?: string } = {}): Promise<string> {
  if (opts.engine) await page.selectOption('select[name=engine]', opts.engine);
  if (opts.cwd) await page.fill('input[name=cwd]', opts.cwd);
  if (opts.mode) await page.selectOption('select[name=permission_mode]', opts.mode);
  await page.getByRole('button', { name: 'Start session' }).click();
  await page.locator('#prompt').waitFor();
  return /#session=(.+)$/.exec(page.url())![1];
}

/** Types a prompt and sends it with Enter. */
export async function sendPrompt(page: Page, text: string): Promise<void> {
  await page.fill('#prompt', text);
  await page.locator('#prompt').press('Enter');
}

/** Pastes a PNG into the composer, as a clipboard paste event carrying a file. */
export function pasteImage(page: Page, pngBase64: string): Promise<void> {
  return putImage(page, pngBase64, 'paste');
}

/** Drops a PNG onto the composer, as a drag and drop of a file. */
export function dropImage(page: Page, pngBase64: string): Promise<void> {
  return putImage(page, pngBase64, 'drop');
}

/** Hands the composer a PNG file the way a person would (`paste` or `drop`); resolves once it shows one more attachment. */
async function putImage(page: Page, pngBase64: string, how: 'paste' | 'drop'): Promise<void> {
  const before = await page.locator('.attachments img').count();
  await page.evaluate(
    ({ b64, how }) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], how === 'paste' ? 'dot.png' : 'dropped.png', { type: 'image/png' }));
      const init = { bubbles: true, cancelable: true };
      if (how === 'paste') document.querySelector('#prompt')!.dispatchEvent(new ClipboardEvent('paste', { ...init, clipboardData: dt }));
      else document.querySelector('form.composer')!.dispatchEvent(new DragEvent('drop', { ...init, dataTransfer: dt }));
    },
    { b64: pngBase64, how },
  );
  await expect.poll(() => page.locator('.attachments img').count()).toBe(before + 1);
}

/** A 1×1 red PNG. */
export const TINY_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';

/** Opens a session from the dashboard list as a controller ("Open") or read-only ("Watch"). */
export async function openFromDashboard(page: Page, sessionId: string, how: 'Open' | 'Watch'): Promise<void> {
  await page
    .locator(`[data-session="${sessionId}"]`)
    .getByRole('button', { name: how === 'Open' ? /as a controller/ : /read-only/ })
    .click();
  await page.locator('[data-testid=transcript]').waitFor();
}

/** The stream items the page holds, from its JSON export (a real download). */
export async function exportedItems(page: Page): Promise<{ seq: number; message?: Record<string, unknown> }[]> {
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export JSON' }).click()]);
  return (JSON.parse(await downloadedText(download)) as { items: { seq: number }[] }).items;
}

/** A download's content as text. Read as a stream: Download.path() throws for a browser connected over the network, as the run's Chromium is. */
export async function downloadedText(download: Download): Promise<string> {
  return (await text(await download.createReadStream())).toString();
}

/** The seqs of the session frames the page holds (unsequenced notices left out). */
export async function exportedSeqs(page: Page): Promise<number[]> {
  return (await exportedItems(page)).map((i) => i.seq).filter((s) => s !== 0);
}

/**
 * Screenshots one view at 1280 and 390 px, light and dark: `NAME-1280-light.png` and so on; each
 * width's page signed in and `prepare`d once (it waited for what it shows), shot light, then
 * switched to dark (the page's theme is CSS `prefers-color-scheme` only) and shot again; the page
 * no wider than the viewport in either. A pass that fails leaves `NAME-WIDTH-THEME-failed.png`
 * (the whole page as it stood) and names it in the error.
 */
export async function screenshots(
  browser: Browser,
  name: string,
  signInLink: () => Promise<string>,
  prepare: (page: Page) => Promise<void>,
): Promise<string[]> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const written: string[] = [];
  for (const width of [1280, 390]) {
    const p = await person(browser, { width });
    let pass = `${name}-${width}-light`;
    try {
      await signIn(p.page, await signInLink());
      await prepare(p.page);
      for (const dark of [false, true]) {
        pass = `${name}-${width}-${dark ? 'dark' : 'light'}`;
        if (dark) await p.page.emulateMedia({ colorScheme: 'dark' });
        // Whatever it shows, the page is no wider than the viewport (wide content scrolls in its own box).
        expect([name, width, await p.page.evaluate(() => document.documentElement.scrollWidth <= innerWidth)]).toEqual([name, width, true]);
        const file = join(SCREENSHOT_DIR, `${pass}.png`);
        await p.page.screenshot({ path: file }); // the viewport, as a person sees it (sticky header and composer in place)
        written.push(file);
      }
    } catch (err) {
      const file = join(SCREENSHOT_DIR, `${pass}-failed.png`);
      const saved = await p.page.screenshot({ path: file, fullPage: true, timeout: 5_000 }).then(
        () => `the page as it stood: ${file}`,
        (e: Error) => `no screenshot of it (${e.message.split('\n')[0]})`,
      );
      throw new Error(`screenshots(): the ${pass} pass failed (${String(err).split('\n')[0]}); ${saved}`, { cause: err });
    } finally {
      await p.context.close();
    }
  }
  return written;
}

/** A fresh single-use sign-in link for `sub` (with `scopes`, e.g. `['view']`) on the page at `pageUrl`, minted with the key in the gateway's state folder (what `tether login-link` does). */
export async function signInLinkFor(pageUrl: string, stateDir: string, sub: string, scopes?: string[]): Promise<string> {
  return signInUrl(pageUrl, await mintLoginCode(loadKeyFile(stateKeyPath(stateDir)), { sub, scopes }));
}

/** The serious and critical violations axe-core finds on the page as it stands, each prefixed with `where`. */
export async function axeViolations(page: Page, where: string): Promise<string[]> {
  const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(axeSource); // through the debugger protocol: the page's CSP (script-src 'self') rightly refuses inline scripts
  const found = await page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: { run: (o: unknown) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> };
      }
    ).axe;
    const r = await axe.run({ resultTypes: ['violations'] });
    return r.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map(
        (v) =>
          `${v.id} (${v.impact}): ${v.nodes
            .map((n) => n.target.join(' '))
            .slice(0, 3)
            .join(', ')}`,
      );
  });
  return found.map((f) => `${where}: ${f}`);
}
