import type { Browser } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { launchChromium, person, signInLinkFor } from './browser.js';
import { makeTempDir } from './claude-cli.js';
import { startTether, type Daemon } from './cli.js';

/** `tether up` with the demo engine, and a Chromium to drive its page. */
export interface WebDemoRig {
  up: Daemon;
  browser: Browser;
  /** The page's origin. */
  pageUrl: string;
  /** A single-use sign-in link for `sub` (with `scopes`, e.g. `['view']`). */
  linkFor(sub: string, scopes?: string[]): Promise<string>;
  /** A person signed in as `sub`, on the dashboard. */
  signedIn(sub: string, opts?: { width?: number; dark?: boolean; scopes?: string[] }): Promise<Awaited<ReturnType<typeof person>>>;
  /** Stops everything it started and removes its folders; safe to call twice. */
  close(): Promise<void>;
}

/** Starts the rig (bounded: `tether up` must print its sign-in line within 30 s); `extraArgs` go to `tether up`. */
export async function startWebDemoRig(name: string, extraArgs: string[] = []): Promise<WebDemoRig> {
  const cwd = makeTempDir(`tether-${name}-cwd-`);
  const state = makeTempDir(`tether-${name}-state-`);
  const started: { up?: Daemon; browser?: Browser } = {};
  let closing: Promise<void> | undefined;
  // Once: a second call waits for the first.
  const close = () =>
    (closing ??= (async () => {
      await started.browser?.close();
      await started.up?.stop('SIGTERM');
      cwd.cleanup();
      state.cleanup();
    })());
  try {
    const args = ['up', '--port', '0', '--engine', 'demo', '--cwd', cwd.path, '--state-dir', state.path];
    const up = (started.up = startTether([...args, ...extraArgs]));
    const pageUrl = new URL((await up.line('sign-in: ', 30_000)).split(' ')[1]).origin;
    const browser = (started.browser = await launchChromium());
    const linkFor = (sub: string, scopes?: string[]) => signInLinkFor(pageUrl, state.path, sub, scopes);
    const signedIn: WebDemoRig['signedIn'] = async (sub, opts = {}) => {
      const p = await person(browser, opts);
      await p.page.goto(await linkFor(sub, opts.scopes));
      await p.page.getByTestId('principal').waitFor();
      return p;
    };
    return { up, browser, pageUrl, linkFor, signedIn, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The rig for the calling describe block: started in its beforeAll, stopped in its afterAll.
 * Its fields are set once the beforeAll has run (read them in a test or a later hook).
 */
export function webDemoRig(name = 'web-demo'): WebDemoRig {
  let started: WebDemoRig | undefined;
  const rig: WebDemoRig = {
    up: undefined as unknown as Daemon,
    browser: undefined as unknown as Browser,
    pageUrl: '',
    linkFor: (sub, scopes) => started!.linkFor(sub, scopes),
    signedIn: (sub, opts) => started!.signedIn(sub, opts),
    close: async () => started?.close(),
  };
  beforeAll(async () => {
    started = await startWebDemoRig(name);
    Object.assign(rig, { up: started.up, browser: started.browser, pageUrl: started.pageUrl });
  }, 60_000);
  afterAll(() => rig.close());
  return rig;
}
