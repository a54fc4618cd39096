import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  downloadedText,
  dropImage,
  exportedItems,
  exportedSeqs,
  launchChromium,
  openFromDashboard,
  pasteImage,
  person,
  screenshots,
  sendPrompt,
  signIn,
  signInLinkFor,
  startSession,
  TINY_PNG,
} from './support/browser.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { runTether, startTether, type Daemon } from './support/cli.js';
import { hasTool } from './support/tools.js';

/**
 * The web client against `tether up` with the demo engine, in headless Chromium: the printed
 * sign-in link, a session started from the page, streaming, a permission prompt answered in
 * one of two browsers, deny with a message, AskUserQuestion, a pasted image, the network cut
 * and restored, and a viewer who can change nothing.
 */
describe.skipIf(!hasTool('chromium'))('web client (demo engine, tether up)', () => {
  let up: Daemon;
  let browser: Browser;
  let cwd: TempDir;
  let state: TempDir;
  let link: string;
  let pageUrl: string;

  /** A fresh sign-in link for `sub`, minted with the gateway's key (what tether login-link does). */
  const linkFor = (sub: string) => signInLinkFor(pageUrl, state.path, sub);
  /** Alice, signed in, in a new session of her own (`id`). */
  const aliceInASession = async () => {
    const alice = await person(browser);
    await signIn(alice.page, await linkFor('alice'));
    return { ...alice, id: await startSession(alice.page) };
  };

  beforeAll(async () => {
    cwd = makeTempDir('tether-web-cwd-');
    state = makeTempDir('tether-web-state-');
    up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', cwd.path, '--state-dir', state.path]);
    const line = await up.line('sign-in: ');
    expect(line).toMatch(/^sign-in: http:\/\/127\.0\.0\.1:\d+\/#login=[\w-]+\.[\w-]+\.[\w-]+ \(single use, valid 5 min\)$/);
    link = line.split(' ')[1];
    pageUrl = new URL(link).origin;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await up?.stop('SIGTERM');
    cwd?.cleanup();
    state?.cleanup();
  });

  it('signs in through the printed link once; a second use of the link fails', async () => {
    const alice = await person(browser);
    await signIn(alice.page, link);
    await expect(alice.page.getByTestId('principal').textContent()).resolves.toBeTruthy();
    const mallory = await person(browser);
    await mallory.page.goto(link);
    await mallory.page.getByRole('alert').filter({ hasText: 'already used' }).waitFor();
    expect(await mallory.page.getByRole('button', { name: 'Start session' }).count()).toBe(0);
    // The credential lives in the tab: signing out forgets it.
    await alice.page.getByRole('button', { name: 'Sign out' }).click();
    await alice.page.getByText('Signed out.').waitFor();
    expect(await alice.page.evaluate(() => sessionStorage.getItem('tether.token'))).toBeNull();
    await alice.page.reload();
    await alice.page.getByText('Open the sign-in link').waitFor();
    expect(alice.errors).toEqual([]);
    await alice.context.close();
    await mallory.context.close();
  });

  it('tether login-link prints a working link, with a QR code beyond loopback', async () => {
    const printed = await runTether(['login-link', '--sub', 'carol', '--state-dir', state.path, '--url', pageUrl]);
    expect(printed.code).toBe(0);
    const url = /^sign-in: (\S+) \(single use, valid 5 min\)$/m.exec(printed.stdout)![1];
    const carol = await person(browser);
    await signIn(carol.page, url);
    await expect(carol.page.getByTestId('principal').textContent()).resolves.toBe('carol');
    await carol.context.close();
    const remote = await runTether(['login-link', '--sub', 'carol', '--state-dir', state.path, '--url', 'http://10.1.2.3:7800']);
    expect(remote.stdout).toContain('sign-in: http://10.1.2.3:7800/#login=');
    expect(remote.stdout).toMatch(/[▀▄█]/); // the QR code's block characters
    const tooLong = await runTether(['login-link', '--sub', 'carol', '--state-dir', state.path, '--ttl', '2h']);
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toContain('a sign-in code lives 1 s to 15 min');
  });

  it('starts a session, streams a prompt, and a permission card answered in one browser disappears from the other', async () => {
    const alice = await aliceInASession();
    const { id } = alice;
    await sendPrompt(alice.page, 'a slow long answer please');
    await alice.page.locator('.md.streaming').waitFor(); // text arrives as it streams…
    await alice.page.getByText('38, 39.').waitFor(); // …and ends complete
    await expect(alice.page.getByTestId('prompt').first().locator('.sender').textContent()).resolves.toBe('alice');

    const bob = await person(browser);
    await signIn(bob.page, await linkFor('bob'));
    await openFromDashboard(bob.page, id, 'Open');
    await alice.page.getByTestId('presence').filter({ hasText: 'bob (controller)' }).waitFor();

    await sendPrompt(alice.page, 'create a file');
    await alice.page.getByTestId('permission-card').waitFor();
    await bob.page.getByTestId('permission-card').waitFor();
    await bob.page.getByTestId('permission-card').getByRole('button', { name: 'Allow', exact: true }).click();
    await alice.page.getByTestId('prompt-decided').filter({ hasText: 'Bash: allowed by bob' }).waitFor();
    expect(await alice.page.getByTestId('permission-card').count()).toBe(0);
    await alice.page.getByText('Done: the command ran.').waitFor();
    expect(readFileSync(join(cwd.path, 'tether-demo.txt'), 'utf8')).toBe('hello from tether\n');
    // The tool ran once: one tool card, one result, in both pages.
    for (const p of [alice.page, bob.page]) {
      await p.getByText('Done: the command ran.').waitFor();
      expect(await p.locator('[data-testid=tool-card][data-tool=Bash]').count()).toBe(1);
      expect(await p.locator('[data-testid=tool-card] .result').count()).toBe(1);
    }
    expect(alice.errors).toEqual([]);
    expect(bob.errors).toEqual([]);
    await bob.context.close();
    await alice.context.close();
  });

  it('deny with a message, an AskUserQuestion option and a pasted image reach the engine', async () => {
    const alice = await aliceInASession();
    await sendPrompt(alice.page, 'run a file command');
    const card = alice.page.getByTestId('permission-card');
    await card.getByRole('button', { name: 'Deny with message…' }).click();
    await card.getByLabel('Message for the model').fill('use the staging database instead');
    await card.locator('form').getByRole('button', { name: 'Deny' }).click();
    await alice.page.locator('.result.error').filter({ hasText: 'use the staging database instead' }).waitFor();
    await alice.page.getByText('Understood, I did not run it.').waitFor();

    await sendPrompt(alice.page, 'ask me a question');
    const q = alice.page.getByTestId('question-card');
    await q.waitFor();
    const option = q.locator('button.option').first();
    const label = (await option.locator('strong').textContent())!;
    await option.click();
    await q.getByRole('button', { name: 'Answer' }).click();
    await alice.page.getByText(`You chose: ${label}.`).waitFor();
    // The question also takes an answer of one's own.
    await sendPrompt(alice.page, 'ask me again');
    await alice.page.getByTestId('question-card').getByLabel('Or your own answer').fill('MariaDB');
    await alice.page.getByTestId('question-card').getByRole('button', { name: 'Answer' }).click();
    await alice.page.getByText('You chose: MariaDB.').waitFor();

    await pasteImage(alice.page, TINY_PNG);
    await dropImage(alice.page, TINY_PNG);
    await sendPrompt(alice.page, 'what is in this picture');
    await alice.page.getByTestId('prompt').filter({ hasText: '[2 images]' }).waitFor();
    await alice.page.getByText('You said: what is in this picture').waitFor();
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('the network cut mid-stream and restored: the transcript is complete, nothing doubled', async () => {
    const alice = await aliceInASession();
    await sendPrompt(alice.page, 'a slow long answer please');
    await alice.page.locator('.md.streaming').waitFor();
    await alice.context.setOffline(true);
    await alice.page.getByTestId('link-banner').waitFor();
    await alice.page.waitForTimeout(2_500); // the rest of the answer streams while this page is away
    await alice.context.setOffline(false);
    await alice.page.getByTestId('link-banner').waitFor({ state: 'detached' });
    await alice.page.getByText('38, 39.').waitFor();
    const texts = await alice.page.getByTestId('assistant-text').allTextContents();
    expect(texts.map((t) => t.trim())).toEqual([`Counting slowly:${Array.from({ length: 39 }, (_, i) => ` ${i + 1}`).join(',')}.`]);
    expect(await alice.page.getByTestId('prompt').count()).toBe(1);
    const seqs = await exportedSeqs(alice.page);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1)); // every frame, once, in order
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it('controls: attention in a background tab, allow for this session, interrupt, mode picker, Markdown export', async () => {
    const alice = await person(browser);
    await alice.context.grantPermissions(['notifications'], { origin: pageUrl });
    // Record the notifications the page raises (the real ones, through a recording proxy).
    await alice.context.addInitScript(() => {
      const w = window as unknown as { shown: string[]; Notification: typeof Notification };
      w.shown = [];
      w.Notification = new Proxy(Notification, {
        construct: (target, args: [string, NotificationOptions]) => (
          w.shown.push(`${args[0]}: ${args[1]?.body}`), Reflect.construct(target, args)
        ),
      });
    });
    await signIn(alice.page, await linkFor('alice'));
    await startSession(alice.page);
    const setHidden = (hidden: boolean) =>
      alice.page.evaluate((h) => {
        Object.defineProperty(document, 'hidden', { configurable: true, get: () => h });
        document.dispatchEvent(new Event('visibilitychange'));
      }, hidden);
    await setHidden(true);
    await sendPrompt(alice.page, 'create a file');
    await alice.page.getByTestId('permission-card').waitFor();
    await expect.poll(() => alice.page.title()).toBe('(1) waiting for you · Tether');
    expect(await alice.page.evaluate(() => (window as unknown as { shown: string[] }).shown)).toEqual([
      'Tether: permission needed: Bash is waiting for an answer',
    ]);
    await setHidden(false);
    await expect.poll(() => alice.page.title()).toBe('Tether');

    // The composer stays usable while the prompt waits: the message queues behind the turn.
    await sendPrompt(alice.page, 'hello while you wait');
    await expect.poll(() => alice.page.locator('#prompt').inputValue()).toBe('');
    await alice.page.getByTestId('prompt').filter({ hasText: 'hello while you wait' }).waitFor();
    const allowRule = alice.page.getByTestId('permission-card').getByTestId('allow-rule');
    await expect(allowRule.textContent()).resolves.toBe("Allow Bash(echo 'hello from tether' > tether-demo.txt) for this session"); // the engine's proposed rule, not the whole tool
    await allowRule.click();
    await alice.page.getByText('Done: the command ran.').waitFor();
    await alice.page.getByText('You said: hello while you wait').waitFor();
    await sendPrompt(alice.page, 'create a file again');
    await expect.poll(() => alice.page.getByText('Done: the command ran.').count()).toBe(2); // no second click needed
    expect(await alice.page.getByTestId('permission-card').count()).toBe(0);

    await sendPrompt(alice.page, 'a slow long answer please');
    await alice.page.locator('.md.streaming').waitFor();
    await alice.page.getByRole('button', { name: 'Interrupt' }).click();
    await alice.page.getByTestId('note').filter({ hasText: 'alice interrupted the turn.' }).waitFor();

    await alice.page.getByLabel('Permission mode').selectOption('acceptEdits');
    // The engine confirms the new mode in a status frame; the picker shows it.
    await expect
      .poll(async () =>
        (await exportedItems(alice.page)).some((i) => i.message?.subtype === 'status' && i.message.permissionMode === 'acceptEdits'),
      )
      .toBe(true);
    expect(await alice.page.getByLabel('Permission mode').inputValue()).toBe('acceptEdits');
    const [md] = await Promise.all([
      alice.page.waitForEvent('download'),
      alice.page.getByRole('button', { name: 'Export Markdown' }).click(),
    ]);
    const text = await downloadedText(md);
    expect(text).toContain('**alice:** create a file');
    expect(text).toContain("- **Bash:** `echo 'hello from tether' > tether-demo.txt`");
    expect(alice.errors).toEqual([]);
    await alice.context.close();
  });

  it("a viewer's page offers no control and says so", async () => {
    const alice = await aliceInASession();
    const { id } = alice;
    const viewer = await person(browser);
    await signIn(viewer.page, await linkFor('victor'));
    await openFromDashboard(viewer.page, id, 'Watch');
    await viewer.page.getByTestId('read-only').waitFor();
    await sendPrompt(alice.page, 'create a file');
    await viewer.page.getByTestId('permission-card').getByText('Waiting for a controller to answer.').waitFor();
    await expect(viewer.page.getByTestId('answerers').textContent()).resolves.toBe('Who may answer: alice (the first answer counts)');
    for (const name of ['Allow', 'Deny', 'Interrupt', 'Send'])
      expect(await viewer.page.getByRole('button', { name, exact: true }).count()).toBe(0);
    expect(await viewer.page.locator('#prompt').count()).toBe(0);
    expect(await viewer.page.locator('main.session select').count()).toBe(0); // the header's webhook settings are the person's, not the session's
    await expect(viewer.page.getByTestId('role').textContent()).resolves.toBe('viewer');
    await alice.page.getByTestId('permission-card').getByRole('button', { name: 'Deny', exact: true }).click();
    await viewer.page.getByTestId('prompt-decided').filter({ hasText: 'denied by alice' }).waitFor();

    // The owner hands control to the viewer, whose page then offers it; then stops the session.
    await alice.page.getByRole('button', { name: 'Let victor control' }).click();
    await viewer.page.locator('#prompt').waitFor();
    await expect(viewer.page.getByTestId('role').textContent()).resolves.toBe('controller');
    expect(await viewer.page.getByTestId('read-only').count()).toBe(0);
    alice.page.once('dialog', (d) => void d.accept());
    await alice.page.getByRole('button', { name: 'Stop session' }).click();
    await viewer.page.getByTestId('session-state').filter({ hasText: 'ended' }).waitFor();

    // Screenshots of the dashboard at both widths, light and dark.
    const files = await screenshots(
      browser,
      'dashboard',
      () => linkFor('alice'),
      async (page) => {
        await page.locator(`[data-session="${id}"]`).waitFor();
      },
    );
    expect(files.every((f) => existsSync(f))).toBe(true);
    await viewer.context.close();
    await alice.context.close();
  });
});
