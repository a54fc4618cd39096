import type { Browser, Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import type { InboxItem } from '../core/protocol/inbox.js';
import { launchChromium, person, signIn } from './support/browser.js';
import { runTether, startTether, type Daemon } from './support/cli.js';
import { startClusterStack, type ClusterStack } from './support/cluster-stack.js';
import { BASH_TURN, dumpLogsOnFailure, TEARDOWN_MS } from './support/cluster-turns.js';
import { isCanUseTool, isResult, until } from './support/items.js';
import { hasTool } from './support/tools.js';
import { waitFor } from './support/wait.js';

/** How soon a prompt raised on one gateway must show on a page or a `tether inbox --watch` of another. */
const WITHIN_MS = 1_000;
/** The window in which a page that shows a waiting prompt must ask the gateway nothing. */
const QUIET_MS = 5_000;
/** The list requests the dashboard makes (the old one made them every 2 s). */
const LISTINGS = /"method":"(sessions\.list|inbox\.list|agents\.list)"/;

/** The JSON arrays `tether inbox --watch --json` printed so far, one per line. */
const printed = (d: Daemon): InboxItem[][] =>
  d
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('['))
    .map((l) => JSON.parse(l) as InboxItem[]);

/**
 * Every list request the page's WebSocket sent, in order, and (`told`) the page's listing
 * rounds (agents.list) and `fleet.changed` notices it received, in the order they happened.
 */
function listingsSent(page: Page): { sent: string[]; told: ('list' | 'changed')[] } {
  const sent: string[] = [];
  const told: ('list' | 'changed')[] = [];
  page.on('websocket', (ws) => {
    ws.on('framesent', (f) => {
      const text = String(f.payload);
      if (!LISTINGS.test(text)) return;
      sent.push(text);
      if (text.includes('"method":"agents.list"')) told.push('list');
    });
    ws.on('framereceived', (f) => String(f.payload).includes('"method":"fleet.changed"') && told.push('changed'));
  });
  return { sent, told };
}

/**
 * The listing rounds in `told` from `from` on that no `fleet.changed` asked for: a round is
 * asked for by a notice received since the round before it (the dashboard lists once more after
 * a round during which a change was told). A page that polls lists unasked.
 */
function unaskedRounds(told: ('list' | 'changed')[], from: number): number {
  let owed = told.slice(0, from).lastIndexOf('changed') > told.slice(0, from).lastIndexOf('list');
  let unasked = 0;
  for (const e of told.slice(from)) {
    if (e === 'changed') owed = true;
    else if (owed) owed = false;
    else unasked++;
  }
  return unasked;
}

/** Issue 33, "the fleet queue": what waits for a person, on every gateway of a cluster, pushed (never polled). */
describe.skipIf(!hasTool('nats-server') || !hasTool('chromium'))('the fleet queue across a 2-gateway cluster', () => {
  let stack: ClusterStack | undefined;
  let browser: Browser | undefined;
  let watcher: Daemon | undefined;
  afterEach(async () => {
    await watcher?.stop('SIGTERM');
    await browser?.close();
    await stack?.stop();
    [watcher, browser, stack] = [undefined, undefined, undefined];
  }, TEARDOWN_MS);

  it('a prompt waiting on the agent of gateway B shows within a second in tether inbox and the dashboard of gateway A, without polling; a viewer never sees it; answered, it leaves; a page back from a dropped link lists afresh', async () => {
    stack = await startClusterStack({ gateways: 2, scenario: BASH_TURN });
    dumpLogsOnFailure(stack);
    const [b, a] = stack.gateways; // the agent dials the first: B holds its sessions; people look through A
    browser = await launchChromium();

    // Alice (create + control) and Vic (view) on A's dashboard; Alice's `tether inbox --watch` on A too.
    const alice = await person(browser);
    const requests: string[] = [];
    alice.page.on('request', (r) => requests.push(r.url()));
    const { sent: listings, told } = listingsSent(alice.page);
    await signIn(alice.page, await stack.signInLink(1, 'alice'));
    await alice.page.getByTestId('needs-none').waitFor();
    const vic = await person(browser);
    await vic.page.goto(await stack.signInLink(1, 'vic', ['view']));
    await vic.page.getByTestId('cannot-start').waitFor();
    const aliceToken = await stack.token('alice');
    watcher = startTether(['inbox', '--watch', '--json', '--gateway', a.url, '--token', aliceToken]);
    await waitFor(() => printed(watcher!).length > 0, 30_000, 'tether inbox --watch to print its first list');
    expect(printed(watcher).at(-1)).toEqual([]);

    // Alice, through B, starts a session whose turn asks for Bash.
    const onB = await stack.client(0, 'alice');
    const s = await onB.createSession({ agent: 'builder' });
    const it = s[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await s.sendUserMessage('append a line');
    const prompt = await until(it, isCanUseTool, seen, 60_000, 'the permission prompt');
    const raisedAt = Date.now();
    const ask = asPermissionRequest((prompt as { message: Record<string, unknown> }).message)!;

    // Within a second it is on A: in the dashboard's "Needs you" and in the watching CLI.
    const row = alice.page.locator(`[data-testid=needs-you] [data-kind=permission][data-needs-session="${s.id}"]`);
    const [onPage, onCli] = await Promise.all([
      row.waitFor({ timeout: WITHIN_MS }).then(() => Date.now() - raisedAt),
      waitFor(
        () => printed(watcher!).some((l) => l.some((i) => i.kind === 'permission')),
        WITHIN_MS,
        'the prompt in tether inbox --watch',
      ).then(() => Date.now() - raisedAt),
    ]);
    expect(onPage).toBeLessThan(WITHIN_MS);
    expect(onCli).toBeLessThan(WITHIN_MS);
    const item = printed(watcher)
      .at(-1)!
      .find((i) => i.kind === 'permission');
    expect(item).toMatchObject({
      kind: 'permission',
      session_id: s.id,
      request_id: ask.requestId,
      tool: 'Bash',
      agent: 'builder',
      owner: 'alice',
      title: 'append a line',
      gateway: b.id,
    });
    expect(await row.textContent()).toContain('wants to use Bash');
    // The one-shot form says the same, from A.
    const once = await runTether(['inbox', '--json', '--gateway', a.url, '--token', aliceToken], { timeoutMs: 30_000 });
    expect(once.code, once.stderr).toBe(0);
    expect(JSON.parse(once.stdout)).toEqual([item]);
    // The session list shows it titled, by the same push.
    await alice.page
      .locator(`[data-testid=sessions] [data-session="${s.id}"] [data-testid=title]`)
      .filter({ hasText: 'append a line' })
      .waitFor();

    // A viewer may not answer it: their list shows the session, but nothing waits for them.
    await vic.page.locator(`[data-testid=sessions] [data-session="${s.id}"]`).waitFor();
    expect(await vic.page.getByTestId('needs-none').isVisible()).toBe(true);
    const vicOnce = await runTether(['inbox', '--json', '--gateway', a.url, '--token', await stack.token('vic', ['view'])], {
      timeoutMs: 30_000,
    });
    expect(vicOnce.code, vicOnce.stderr).toBe(0);
    expect(JSON.parse(vicOnce.stdout)).toEqual([]);

    // No polling: while the prompt waits, the page lists only when the gateway tells it of a
    // change (on a loaded machine a change made just before, as Vic's look, may be told late).
    const [listed, fetched, toldBefore] = [listings.length, requests.length, told.length];
    await new Promise((r) => setTimeout(r, QUIET_MS));
    expect(
      unaskedRounds(told, toldBefore),
      `in the quiet window, told ${told.slice(toldBefore).join(', ')}; listed ${listings.slice(listed).join(' ')}`,
    ).toBe(0);
    expect(requests.slice(fetched)).toEqual([]);

    // Answered elsewhere (on B), it leaves both lists.
    await s.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    await until(it, isResult, seen, 60_000, 'the turn to finish');
    await row.waitFor({ state: 'detached', timeout: 10_000 });
    await alice.page.getByTestId('needs-none').waitFor({ timeout: 10_000 });
    await waitFor(() => printed(watcher!).at(-1)?.length === 0, 10_000, 'tether inbox --watch to print an empty list');

    // A page whose link dropped lists afresh when it is back: the session ended meanwhile (told to nobody there) shows.
    await alice.context.setOffline(true);
    await alice.page
      .getByText(/reconnecting|Cannot reach/)
      .first()
      .waitFor({ timeout: 10_000 });
    await s.stop();
    await alice.context.setOffline(false);
    await alice.page.locator(`[data-testid=needs-you] [data-kind=ended][data-needs-session="${s.id}"]`).waitFor({ timeout: 15_000 });
    expect(vic.errors).toEqual([]);
    expect(alice.errors).toEqual([]);
  }, 240_000);
});
