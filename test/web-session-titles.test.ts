import { describe, expect, it } from 'vitest';
import { openFromDashboard, sendPrompt, startSession } from './support/browser.js';
import { hasTool } from './support/tools.js';
import { webDemoRig } from './support/web-demo-rig.js';

/** Issue 33 on the web page (tether up, demo engine): titles in the header and the dashboard, renamed by the owner only; search and filters. */
describe.skipIf(!hasTool('chromium'))('web page: session titles, search and filters', () => {
  const rig = webDemoRig('web-titles');

  it('the first prompt titles the session; the owner renames it from the header, a controller has no Rename; the dashboard searches and filters by title, owner and state', async () => {
    const alice = await rig.signedIn('alice');
    const id = await startSession(alice.page);
    await expect.poll(() => alice.page.getByTestId('session-title').textContent()).toBe('Untitled session');
    await sendPrompt(alice.page, 'Tidy up the release notes');
    await alice.page.getByTestId('session-title').filter({ hasText: 'Tidy up the release notes' }).waitFor();

    const bob = await rig.signedIn('bob');
    await openFromDashboard(bob.page, id, 'Open');
    await bob.page.getByTestId('session-title').filter({ hasText: 'Tidy up the release notes' }).waitFor();
    expect(await bob.page.getByRole('button', { name: 'Rename' }).count()).toBe(0);

    await alice.page.getByRole('button', { name: 'Rename' }).click();
    await alice.page.getByLabel('Session title').fill('Release notes for 2.0');
    await alice.page.getByRole('button', { name: 'Save' }).click();
    // Every member's header follows (the title_changed event), and the transcript says who renamed it.
    await bob.page.getByTestId('session-title').filter({ hasText: 'Release notes for 2.0' }).waitFor();
    await bob.page.getByText('alice named the session “Release notes for 2.0”.').waitFor();

    // Bob's own session, for the filters.
    await bob.page.getByTitle('Back to the dashboard').first().click();
    const bobs = await startSession(bob.page);
    await sendPrompt(bob.page, 'Bump the dependencies');
    await bob.page.getByTestId('session-title').filter({ hasText: 'Bump the dependencies' }).waitFor();
    await alice.page.getByTitle('Back to the dashboard').first().click();
    const rows = alice.page.locator('[data-testid=sessions] .session-row');
    const row = (sid: string) => alice.page.locator(`[data-testid=sessions] [data-session="${sid}"]`);
    await row(bobs).locator('[data-testid=title]').filter({ hasText: 'Bump the dependencies' }).waitFor(); // pushed, not polled
    await row(id).locator('[data-testid=title]').filter({ hasText: 'Release notes for 2.0' }).waitFor();

    await alice.page.getByRole('searchbox', { name: 'Search' }).fill('release NOTES');
    await expect.poll(() => rows.count()).toBe(1);
    await row(id).waitFor();
    await alice.page.getByRole('searchbox', { name: 'Search' }).fill('');
    await alice.page.getByLabel('Owner').selectOption('bob');
    await expect.poll(() => rows.count()).toBe(1);
    await row(bobs).waitFor();
    // Both turns are over: both idle; with the owner filter too, one.
    await alice.page.getByLabel('Owner').selectOption('');
    await alice.page.getByLabel('State').selectOption('idle');
    await expect.poll(() => rows.count()).toBe(2);
    await alice.page.getByLabel('Owner').selectOption('alice');
    await expect.poll(() => rows.count()).toBe(1);
    await row(id).waitFor();
    await alice.page.locator('select[name=filter-agent]').selectOption('local');
    await alice.page.getByLabel('Owner').selectOption('');
    await alice.page.getByLabel('State').selectOption('');
    await expect.poll(() => rows.count()).toBe(2);
    expect(alice.errors).toEqual([]);
    expect(bob.errors).toEqual([]);
    await alice.context.close();
    await bob.context.close();
  }, 120_000);
});
