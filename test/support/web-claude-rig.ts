import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { launchChromium, signInLinkFor } from './browser.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './claude-cli.js';
import { startTether, type Daemon } from './cli.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeResponse } from './fake-anthropic.js';

/** `tether up` on the real Claude Code CLI with a scripted model, and a Chromium to drive its page. */
export interface WebClaudeRig {
  up: Daemon;
  fake: FakeAnthropic;
  browser: Browser;
  /** The agent's working folder; `home` the engine's HOME; `state` the gateway's state folder. */
  cwd: TempDir;
  home: TempDir;
  state: TempDir;
  /** The page's origin. */
  pageUrl: string;
  /** A single-use sign-in link for `sub`. */
  linkFor(sub: string): Promise<string>;
  /** What `tether up` printed (its last lines) and what the fake model was asked: for a failing wait's message. */
  explain(): string;
  /** Stops everything it started and removes its folders; safe to call twice. */
  close(): Promise<void>;
}

export interface WebClaudeRigOptions {
  /** The model's script; given the working folder, for tool inputs that name files in it. */
  responses: FakeResponse[] | ((cwd: string) => FakeResponse[]);
  /** Files written into the working folder first, by name. */
  files?: Record<string, string>;
  /** A policy for the gateway (`--policy`), written to a file in a folder of the rig's own. */
  policy?: unknown;
}

/** Starts the rig (bounded: `tether up` must print its sign-in line within 30 s). */
export async function startWebClaudeRig(name: string, opts: WebClaudeRigOptions): Promise<WebClaudeRig> {
  const cwd = makeTempDir(`tether-${name}-cwd-`);
  const home = makeTempDir(`tether-${name}-home-`);
  const state = makeTempDir(`tether-${name}-state-`);
  const extra = makeTempDir(`tether-${name}-etc-`);
  const started: { up?: Daemon; fake?: FakeAnthropic; browser?: Browser } = {};
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await started.browser?.close();
    await started.up?.stop('SIGTERM');
    await started.fake?.close();
    for (const d of [cwd, home, state, extra]) d.cleanup();
  };
  try {
    for (const [file, text] of Object.entries(opts.files ?? {})) writeFileSync(join(cwd.path, file), text);
    const args = [
      'up',
      '--port',
      '0',
      '--engine',
      'claude',
      '--engine-command',
      claudeBinaryPath(),
      '--cwd',
      cwd.path,
      '--state-dir',
      state.path,
    ];
    if (opts.policy !== undefined) {
      const policy = join(extra.path, 'policy.json');
      writeFileSync(policy, JSON.stringify(opts.policy));
      args.push('--policy', policy);
    }
    const fake = (started.fake = await startFakeAnthropic({
      responses: typeof opts.responses === 'function' ? opts.responses(cwd.path) : opts.responses,
    }));
    const up = (started.up = startTether(args, { env: claudeTestEnv({ home: home.path, baseUrl: fake.url }) }));
    const pageUrl = new URL((await up.line('sign-in: ', 30_000)).split(' ')[1]).origin;
    const browser = (started.browser = await launchChromium());
    const explain = () =>
      [
        `tether up's stderr (last 4 KB):\n${up.stderr().slice(-4096)}`,
        `the fake model's requests: ${fake.requests.map((r) => `${r.method} ${r.path}`).join(', ') || 'none'}`,
      ].join('\n');
    const linkFor = (sub: string) => signInLinkFor(pageUrl, state.path, sub);
    return { up, fake, browser, cwd, home, state, pageUrl, linkFor, explain, close };
  } catch (err) {
    await close();
    throw err;
  }
}
