import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  launchChromium,
  openFromDashboard,
  person,
  screenshots,
  sendPrompt,
  signIn,
  signInLinkFor,
  startSession,
} from './support/browser.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startTether, type Daemon } from './support/cli.js';

const ENGINE = fileURLToPath(new URL('./support/long-session-engine.mjs', import.meta.url));
const TURNS = 2_000;
const parses = (page: Page) => page.evaluate(() => (globalThis as { __tetherMarkdown?: { parses: number } }).__tetherMarkdown?.parses);
/** The markdown parses so far and the streamed answer's words on screen (0 once it finished), read in one go. */
const parsesAndWords = (page: Page) =>
  page.evaluate(() => ({
    parses: (globalThis as { __tetherMarkdown?: { parses: number } }).__tetherMarkdown?.parses ?? 0,
    words: (document.querySelector('.md.streaming')?.textContent ?? '').split(/\s+/).filter(Boolean).length,
  }));
const waitForLast = (page: Page) =>
  page
    .getByTestId('assistant-text')
    .filter({ hasText: `Answer ${TURNS - 1}:` })
    .waitFor({ timeout: 60_000 });

/**
 * The web page in a long session (issue 28, items 5 and 13), in headless Chromium against
 * `tether up` with a stand-in engine that writes 2,000 finished turns at once: the page renders
 * only what is near the view, parses a finished answer's markdown once, re-renders only the
 * answer that streams, and highlights code with a highlighter it loads only for code.
 */
describe('web page: a 2,000-turn session', () => {
  let up: Daemon;
  let browser: Browser;
  let cwd: TempDir;
  let state: TempDir;
  let pageUrl: string;
  let alice: Awaited<ReturnType<typeof person>>;
  let sessionId: string;
  const highlighterLoads: string[] = [];
  /** The control requests alice's page sent, by subtype (the stand-in engine answers each with an empty success). */
  const asked: string[] = [];
  /** Each get_context_usage question as it left the page (ms), and when an answer to it came back, if one did. */
  const contextAsks: { id: string; at: number; answeredAt?: number }[] = [];
  const linkFor = (sub: string) => signInLinkFor(pageUrl, state.path, sub);

  beforeAll(async () => {
    cwd = makeTempDir('tether-weblong-cwd-');
    state = makeTempDir('tether-weblong-state-');
    up = startTether(['up', '--port', '0', '--engine', 'claude', '--engine-command', ENGINE, '--cwd', cwd.path, '--state-dir', state.path]);
    pageUrl = new URL((await up.line('sign-in: ', 30_000)).split(' ')[1]).origin;
    browser = await launchChromium();
    alice = await person(browser);
    alice.page.on('request', (r) => r.url().endsWith('/highlighter.js') && highlighterLoads.push(r.url()));
    alice.page.on('websocket', (ws) =>
      ws.on('framesent', (f) => {
        const subtype = /"type":"control_request".*?"subtype":"(\w+)"/.exec(String(f.payload))?.[1];
        if (subtype) asked.push(subtype);
        const id = /"request_id":"([\w-]+)"/.exec(String(f.payload))?.[1];
        if (subtype === 'get_context_usage' && id) contextAsks.push({ id, at: Date.now() });
      }),
    );
    alice.page.on('websocket', (ws) =>
      ws.on('framereceived', (f) => {
        const text = String(f.payload);
        if (!text.includes('session.reply')) return;
        // the reply's line is JSON inside JSON: its quotes come escaped
        for (const [, id] of text.matchAll(/\\?"request_id\\?":\\?"([\w-]+)/g)) {
          const ask = contextAsks.find((a) => a.id === id);
          if (ask) ask.answeredAt ??= Date.now();
        }
      }),
    );
    await signIn(alice.page, await linkFor('alice'));
    sessionId = await startSession(alice.page);
    await sendPrompt(alice.page, `turns ${TURNS}`);
    await waitForLast(alice.page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await up?.stop('SIGTERM');
    cwd?.cleanup();
    state?.cleanup();
  });

  it('renders only the answers near the view, keeps to the bottom, and shows the first ones when scrolled to the top', async () => {
    const rendered = await alice.page.getByTestId('assistant-text').count();
    expect(rendered).toBeGreaterThan(0);
    expect(rendered).toBeLessThan(150); // of 2,000
    expect(await alice.page.getByTestId('jump-latest').count()).toBe(0); // still at the bottom
    await alice.page.evaluate(() => window.scrollTo({ top: 0 }));
    await alice.page.getByTestId('assistant-text').filter({ hasText: 'Answer 0:' }).waitFor();
    expect(await alice.page.getByTestId('assistant-text').count()).toBeLessThan(150);
    expect(alice.errors).toEqual([]);
  });

  it('asks the engine for its context use one question at a time: 2,000 turns ending in a burst do not send 2,000 questions', () => {
    // One question out at a time: the next leaves only once the previous was answered (an error
    // answer too: the gateway may refuse one) or its timeout (30 s) passed. The old page sent one
    // per finished turn, all at once.
    const n = contextAsks.length;
    expect(n).toBeGreaterThanOrEqual(1);
    expect(n).toBeLessThan(10);
    const overlapping = contextAsks.slice(1).filter((ask, i) => {
      const before = contextAsks[i];
      return !(before.answeredAt !== undefined && before.answeredAt <= ask.at) && ask.at - before.at < 29_900;
    });
    expect(overlapping, JSON.stringify(contextAsks)).toEqual([]);
  });

  it('parses a finished answer once: scrolled away and back, nothing is parsed again', async () => {
    await alice.page.evaluate(() => window.scrollTo({ top: 0 }));
    await alice.page.getByTestId('assistant-text').filter({ hasText: 'Answer 0:' }).waitFor();
    const atTop = await parses(alice.page);
    expect(atTop).toBeGreaterThan(0);
    await alice.page.getByTestId('jump-latest').click();
    await waitForLast(alice.page);
    await alice.page.evaluate(() => window.scrollTo({ top: 0 }));
    await alice.page.getByTestId('assistant-text').filter({ hasText: 'Answer 0:' }).waitFor();
    await alice.page.getByTestId('jump-latest').click();
    await waitForLast(alice.page);
    const after = await parses(alice.page);
    await alice.page.evaluate(() => window.scrollTo({ top: 0 }));
    await alice.page.getByTestId('assistant-text').filter({ hasText: 'Answer 0:' }).waitFor();
    expect(await parses(alice.page)).toBe(after); // the top answers again: from the cache
    await alice.page.getByTestId('jump-latest').click();
    await waitForLast(alice.page);
  });

  it('a streamed delta re-renders only the answer that streams: one parse, DOM changes only inside it', async () => {
    if (await alice.page.getByTestId('jump-latest').count()) await alice.page.getByTestId('jump-latest').click();
    await sendPrompt(alice.page, 'stream');
    const streaming = alice.page.locator('.md.streaming');
    await streaming.filter({ hasText: 'Streaming' }).waitFor();
    await alice.page.evaluate(() => {
      const w = window as unknown as { __mutations: string[]; __observer: MutationObserver };
      w.__mutations = [];
      w.__observer = new MutationObserver((records) => {
        for (const r of records) {
          const el = r.target instanceof Element ? r.target : r.target.parentElement;
          w.__mutations.push(el?.closest('.md.streaming, .md') ? 'streaming' : `${el?.tagName}.${el?.className}`);
        }
      });
      w.__observer.observe(document.querySelector('[data-testid=transcript]')!, {
        subtree: true,
        childList: true,
        characterData: true,
        attributes: true,
      });
    });
    const before = await parsesAndWords(alice.page);
    await streaming.filter({ hasText: 'piece' }).waitFor();
    await streaming.filter({ hasText: 'at' }).waitFor();
    const mutations = await alice.page.evaluate(() => {
      const w = window as unknown as { __mutations: string[]; __observer: MutationObserver };
      w.__observer.disconnect();
      return w.__mutations;
    });
    const after = await parsesAndWords(alice.page);
    const delta = after.parses - before.parses;
    // One parse per delta that arrived meanwhile (of 2,000 answers on the page): counted from the
    // words on screen, since on a loaded machine more than the three awaited can arrive before
    // the read; once the answer finished (no streaming element), its one final parse on top.
    const arrived = after.words === 0 ? 6 - before.words + 1 : after.words - before.words;
    expect(delta).toBeGreaterThanOrEqual(1);
    expect(delta).toBeLessThanOrEqual(arrived);
    expect(mutations.length).toBeGreaterThan(0);
    expect(mutations.filter((m) => m !== 'streaming')).toEqual([]);
    await alice.page
      .getByTestId('assistant-text')
      .filter({ hasText: 'Streaming one piece at a time.' })
      .and(alice.page.locator('.md:not(.streaming)'))
      .waitFor();
  });

  it('highlights code with a highlighter fetched only when code shows', async () => {
    expect(highlighterLoads).toEqual([]); // 2,000 answers and a streamed one, none with code
    await sendPrompt(alice.page, 'code please');
    const code = alice.page.locator('.md pre code.language-ts');
    await code.locator('.hljs-keyword').first().waitFor();
    expect(await code.locator('.hljs-keyword').allTextContents()).toEqual(expect.arrayContaining(['export', 'const']));
    expect(await code.locator('.hljs-comment').textContent()).toBe('// the answer');
    expect(await code.textContent()).toBe('export const answer: number = 42; // the answer'); // the text is unchanged (and Copy copies it)
    expect(highlighterLoads).toHaveLength(1);
    expect(alice.errors).toEqual([]);
  });

  it('screenshots: the 2,000-turn session, opened late, at 390 and 1280 px', async () => {
    const written = await screenshots(
      browser,
      'long-session',
      () => linkFor('bob'),
      async (page) => {
        await openFromDashboard(page, sessionId, 'Watch');
        await page.getByTestId('assistant-text').filter({ hasText: 'Here:' }).waitFor({ timeout: 60_000 });
      },
    );
    expect(written).toHaveLength(4);
  }, 180_000);
});
