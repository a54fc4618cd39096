import { describe, expect, it } from 'vitest';
import { openFromDashboard, startSession } from './support/browser.js';
import { hasTool } from './support/tools.js';
import { webDemoRig } from './support/web-demo-rig.js';

/** Issue 33 on the web page (tether up, demo engine): the session header's Follow toggle, kept by the gateway. */
describe.skipIf(!hasTool('chromium'))('web page: following a session', () => {
  const rig = webDemoRig('web-follow');

  it('a member who is not the owner follows from the header; the gateway keeps it (shown again on reopening); unfollowed, it is off; the owner has no toggle', async () => {
    const alice = await rig.signedIn('alice');
    const id = await startSession(alice.page);
    await alice.page.getByTestId('role').filter({ hasText: 'owner' }).waitFor();
    expect(await alice.page.getByTestId('follow').count()).toBe(0);

    const bob = await rig.signedIn('bob');
    await openFromDashboard(bob.page, id, 'Open');
    const toggle = bob.page.getByTestId('follow');
    await toggle.filter({ hasText: 'Follow' }).waitFor();
    expect(await toggle.getAttribute('aria-pressed')).toBe('false');
    await toggle.click();
    await toggle.filter({ hasText: 'Following' }).waitFor();
    expect(await toggle.getAttribute('aria-pressed')).toBe('true');

    // Reopened, the header reads the gateway's settings: still following; then stop.
    await bob.page.getByTitle('Back to the dashboard').first().click();
    await openFromDashboard(bob.page, id, 'Open');
    await toggle.filter({ hasText: 'Following' }).waitFor();
    await toggle.click();
    await toggle.filter({ hasText: /^Follow$/ }).waitFor();
    await bob.page.getByTitle('Back to the dashboard').first().click();
    await openFromDashboard(bob.page, id, 'Open');
    await toggle.filter({ hasText: /^Follow$/ }).waitFor();
    expect(alice.errors).toEqual([]);
    expect(bob.errors).toEqual([]);
    await alice.context.close();
    await bob.context.close();
  }, 120_000);
});
