import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { FileUsageStore } from '../gateway/usage/usage-store.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { person, sendPrompt, signIn, signInLinkFor, startSession } from './support/browser.js';
import type { TempDir } from './support/claude-cli.js';
import type { FakeAnthropic } from './support/fake-anthropic.js';
import { hasTool } from './support/tools.js';
import { startWebClaudeRig, type WebClaudeRig } from './support/web-claude-rig.js';

/**
 * The session header on the web page against the real Claude Code CLI (scripted model): the
 * model picker offers the engine's own models cut to the policy's `models` list, and nothing
 * typed; after each turn the header shows the context use and the session's cost (issue 28,
 * items 15 and 17).
 */
describe.skipIf(!hasTool('chromium'))('web page: the session header (real Claude Code CLI)', () => {
  let fake: FakeAnthropic;
  let browser: Browser;
  let pageUrl: string;
  let state: TempDir;

  let rig: WebClaudeRig;
  beforeAll(async () => {
    rig = await startWebClaudeRig('webh', {
      responses: [{ text: 'First answer.' }, { text: 'Second answer.' }],
      policy: { models: ['sonnet', 'claude-haiku-*'] },
    });
    ({ fake, browser, pageUrl, state } = rig);
  }, 60_000);
  afterAll(() => rig?.close());

  it("the model picker lists the engine's models the policy allows, nothing else and no free text; a pick reaches the engine", async () => {
    const alice = await person(browser);
    await signIn(alice.page, await signInLinkFor(pageUrl, state.path, 'alice'));
    await startSession(alice.page);
    const picker = alice.page.getByRole('combobox', { name: 'Model' });
    // the engine's model list comes once the real CLI has started: slow on a loaded machine
    await picker.waitFor({ timeout: 45_000 }).catch((err: Error) => {
      throw new Error(`${err.message}\n${rig.explain()}`);
    });
    const options = await picker
      .locator('option:not([disabled])')
      .evaluateAll((os) => os.map((o) => [(o as HTMLOptionElement).value, o.textContent]));
    expect(options).toEqual([
      ['sonnet', 'Sonnet'],
      ['claude-haiku-5-5', 'Haiku'],
    ]);
    expect(await alice.page.getByRole('textbox', { name: 'Model' }).count()).toBe(0);

    await picker.selectOption('claude-haiku-5-5');
    await sendPrompt(alice.page, 'Hello');
    await alice.page.getByText('First answer.').waitFor();
    expect(fake.modelRequests().at(-1)?.model).toBe('claude-haiku-5-5');
    expect(alice.errors).toEqual([]);
  }, 90_000);

  it("after each turn the header shows the context use (a meter) and the session's cost", async () => {
    const alice = await person(browser);
    await signIn(alice.page, await signInLinkFor(pageUrl, state.path, 'alice'));
    await startSession(alice.page);
    expect(await alice.page.getByTestId('context-use').count()).toBe(0); // nothing before a turn: no guess
    await sendPrompt(alice.page, 'Hello');
    await alice.page.getByText('Second answer.').waitFor();
    const context = alice.page.getByTestId('context-use');
    await context.waitFor();
    expect(await context.textContent()).toMatch(/^Context\s+\d+(\.\d)?k of \d+(\.\d)?[kM] tokens \(\d+%\)$/);
    const meter = Number(await context.locator('meter').getAttribute('value'));
    expect(meter).toBeGreaterThanOrEqual(0);
    expect(meter).toBeLessThanOrEqual(100);
    const cost = alice.page.getByTestId('session-cost');
    const first = (await cost.textContent())!;
    expect(first).toMatch(/^\$0\.\d*[1-9]\d*$/);
    // The next turn adds to the cost (the engine's running total), and the meter is asked again.
    await sendPrompt(alice.page, 'Again');
    await alice.page.getByText('OK.').waitFor();
    await expect.poll(() => cost.textContent()).not.toBe(first);
    expect(Number((await cost.textContent())!.slice(1))).toBeGreaterThan(Number(first.slice(1)));
    expect(alice.errors).toEqual([]);
  }, 90_000);

  it("an admin's dashboard shows the team's usage from the gateway's ledger (by person, by model); a member's does not", async () => {
    const admin = await person(browser);
    await signIn(admin.page, await signInLinkFor(pageUrl, state.path, 'root', ['create', 'control', 'admin']));
    const team = admin.page.getByTestId('team-usage');
    await team.waitFor({ timeout: 30_000 });
    // alice's turns of the tests above, as `tether up` booked them in its state folder's ledger.
    const booked = new FileUsageStore(join(state.path, 'usage.jsonl')).loadAll().entries.filter((e) => e.principal === 'alice');
    expect(booked.length).toBeGreaterThanOrEqual(3);
    const row = team.locator('tr', { hasText: 'alice' });
    await expect.poll(() => row.locator('td').nth(1).textContent()).toBe(String(booked.length));
    await team.getByRole('combobox', { name: 'By' }).selectOption('model');
    await expect.poll(() => team.locator('th').first().textContent()).toBe('model');
    expect(admin.errors).toEqual([]);

    const member = await person(browser);
    await signIn(member.page, await signInLinkFor(pageUrl, state.path, 'bob'));
    await member.page.getByRole('heading', { name: 'Agents' }).waitFor();
    expect(await member.page.getByTestId('team-usage').count()).toBe(0);
  }, 90_000);
});
