import type { Browser } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { launchChromium, person, signInLinkFor } from './browser.js';
import { makeTempDir, type TempDir } from './claude-cli.js';
import { startTether, type Daemon } from './cli.js';

/** `tether up` with the demo engine and a headless Chromium, shared by the tests of one describe block. */
export interface WebDemoRig {
  /** Set once the block's beforeAll has run. */
  browser: Browser;
  /** The page's origin; set once the block's beforeAll has run. */
  pageUrl: string;
  /** A single-use sign-in link for `sub`. */
  linkFor(sub: string, scopes?: string[]): Promise<string>;
  /** A person at a fresh browser context, signed in as `sub`, on the dashboard. */
  signedIn(sub: string, opts?: { width?: number; scopes?: string[] }): ReturnType<typeof person>;
}

/** Starts the rig before the calling describe block's tests (beforeAll) and stops it after them. */
export function webDemoRig(): WebDemoRig {
  let up: Daemon | undefined;
  let cwd: TempDir | undefined;
  let state: TempDir | undefined;
  const rig: WebDemoRig = {
    browser: undefined as unknown as Browser,
    pageUrl: '',
    linkFor: (sub, scopes) => signInLinkFor(rig.pageUrl, state!.path, sub, scopes),
    async signedIn(sub, opts = {}) {
      const p = await person(rig.browser, opts);
      await p.page.goto(await rig.linkFor(sub, opts.scopes));
      await p.page.getByTestId('principal').waitFor();
      return p;
    },
  };
  beforeAll(async () => {
    cwd = makeTempDir('tether-web28-cwd-');
    state = makeTempDir('tether-web28-state-');
    up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', cwd.path, '--state-dir', state.path]);
    rig.pageUrl = new URL((await up.line('sign-in: ')).split(' ')[1]).origin;
    rig.browser = await launchChromium();
  });
  afterAll(async () => {
    await rig.browser?.close();
    await up?.stop('SIGTERM');
    cwd?.cleanup();
    state?.cleanup();
  });
  return rig;
}
