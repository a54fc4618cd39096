import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openFromDashboard, person, sendPrompt, signIn, startSession } from './support/browser.js';
import { hasTool } from './support/tools.js';
import { startWebClaudeRig, type WebClaudeRig } from './support/web-claude-rig.js';

/** A slow answer: the turn still runs while the page sends more. */
const SLOW = { text: 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen', chunk_delay_ms: 250 };

/**
 * The queue on the web page, against the real Claude Code CLI (scripted model): prompts sent
 * while a turn runs are listed below the transcript with their authors, in the order they will
 * run; Withdraw shows only to the author and the owner; a withdrawn prompt never reaches the
 * model; the other moves into the transcript when it starts; Steer cuts into the running turn.
 */
describe.skipIf(!hasTool('chromium'))('web page: queued prompts (real Claude Code CLI)', () => {
  let rig: WebClaudeRig;
  beforeAll(async () => {
    rig = await startWebClaudeRig('webq', { responses: [SLOW, { text: 'Carol answered.' }, SLOW, { text: 'Steered answer.' }] });
  }, 60_000);
  afterAll(() => rig?.close());

  it('lists queued prompts with authors and Withdraw for those allowed; the withdrawn one never reaches the model; the other moves into the transcript; Steer cuts in', async () => {
    const [alice, bob, carol] = [await person(rig.browser), await person(rig.browser), await person(rig.browser)];
    await signIn(alice.page, await rig.linkFor('alice'));
    const id = await startSession(alice.page);
    for (const [p, name] of [
      [bob, 'bob'],
      [carol, 'carol'],
    ] as const) {
      await signIn(p.page, await rig.linkFor(name));
      await openFromDashboard(p.page, id, 'Open');
    }
    await sendPrompt(alice.page, 'first prompt');
    await alice.page.locator('.md.streaming').filter({ hasText: 'two' }).waitFor();
    await sendPrompt(bob.page, 'BOB_QUEUED');
    await sendPrompt(carol.page, 'CAROL_QUEUED');

    // Every member sees both, in order, with their authors, below the transcript.
    const queue = (p: typeof alice) => p.page.getByTestId('queued-prompt');
    for (const p of [alice, bob, carol]) {
      await queue(p).filter({ hasText: 'CAROL_QUEUED' }).waitFor();
      expect((await queue(p).locator('.sender').allTextContents()).map((t) => t.trim())).toEqual(['bob', 'carol']);
    }
    // Withdraw: the owner for both, each author for their own, nobody else.
    const withdraw = (p: typeof alice, who: string) => p.page.getByRole('button', { name: `Withdraw ${who}'s queued prompt` });
    expect([await withdraw(alice, 'bob').count(), await withdraw(alice, 'carol').count()]).toEqual([1, 1]);
    expect([await withdraw(bob, 'bob').count(), await withdraw(bob, 'carol').count()]).toEqual([1, 0]);
    expect([await withdraw(carol, 'bob').count(), await withdraw(carol, 'carol').count()]).toEqual([0, 1]);

    await withdraw(bob, 'bob').click();
    for (const p of [alice, bob, carol]) {
      await p.page.getByTestId('note').filter({ hasText: 'bob withdrew a queued prompt' }).waitFor();
      expect(await queue(p).filter({ hasText: 'BOB_QUEUED' }).count()).toBe(0);
    }
    // Carol's starts when the first turn ends: it leaves the list for the transcript, then its answer.
    for (const p of [alice, bob, carol]) {
      await p.page.getByText('Carol answered.').waitFor();
      expect(await p.page.getByTestId('queue').count()).toBe(0);
      const order = await p.page.locator('.transcript [data-testid=prompt], .transcript [data-testid=assistant-text]').allTextContents();
      expect(order.map((t) => t.trim().slice(0, 16))).toEqual([
        'alicefirst promp',
        'one two three fo',
        'carolCAROL_QUEUE',
        'Carol answered.',
      ]);
    }
    expect(rig.fake.requests.some((r) => r.raw.includes('BOB_QUEUED'))).toBe(false);

    // Steer: while a turn runs the composer offers it; the steer cuts in and says who.
    await sendPrompt(alice.page, 'another slow one');
    await alice.page.locator('.md.streaming').filter({ hasText: 'two' }).waitFor();
    await bob.page.fill('#prompt', 'STEER_TEXT');
    await bob.page.getByRole('button', { name: 'Steer' }).click();
    for (const p of [alice, bob]) {
      await p.page.getByTestId('note').filter({ hasText: 'bob steered: the running turn was cut here' }).waitFor();
      await p.page.getByText('Steered answer.').waitFor();
    }
    expect(rig.fake.modelRequests().at(-1)!.raw).toContain('STEER_TEXT');
    for (const p of [alice, bob, carol]) expect(p.errors).toEqual([]);
  }, 120_000);
});
