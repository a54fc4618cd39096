import type { LaunchOptions } from 'playwright-core';
import { toolPath } from './tools.js';

export const CHROMIUM = toolPath('chromium') ?? '/usr/bin/chromium';

/** Bound on every wait for the page, and on Chromium's start. */
export const PAGE_TIMEOUT_MS = 20_000;

/** How the tests start Chromium: Debian's binary (never a downloaded browser), headless, nothing phoning home. */
export const CHROMIUM_LAUNCH: LaunchOptions = {
  executablePath: CHROMIUM,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-quic',
    '--no-first-run',
    '--disable-component-update',
    '--disable-sync',
  ],
  timeout: PAGE_TIMEOUT_MS,
};
