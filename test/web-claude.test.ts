import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
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
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './support/claude-cli.js';
import { startTether, type Daemon } from './support/cli.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';
import { hasTool } from './support/tools.js';

const QUESTION = {
  question: 'Which database should we use?',
  header: 'Database',
  options: [
    { label: 'Postgres', description: 'Relational, robust' },
    { label: 'SQLite', description: 'Embedded, zero setup' },
  ],
  multiSelect: false,
};
const COUNT = Array.from({ length: 24 }, (_, i) => `word${i + 1}`).join(' ');

/**
 * The web client against `tether up` running the real Claude Code CLI, whose model is the
 * scripted fake Messages API: what the page sends must reach the model in the CLI's own terms.
 */
describe.skipIf(!hasTool('chromium'))('web client (real Claude Code CLI, scripted model)', () => {
  let up: Daemon;
  let fake: FakeAnthropic;
  let browser: Browser;
  let cwd: TempDir;
  let home: TempDir;
  let state: TempDir;
  let link: string;
  let pageUrl: string;
  let notes: string;
  const linkFor = (sub: string) => signInLinkFor(pageUrl, state.path, sub);

  beforeAll(async () => {
    cwd = makeTempDir('tether-webc-cwd-');
    home = makeTempDir('tether-webc-home-');
    state = makeTempDir('tether-webc-state-');
    notes = join(cwd.path, 'notes.txt');
    writeFileSync(notes, 'title = demo\ncolour = red\nsize = 3\n');
    fake = await startFakeAnthropic({
      responses: [
        { thinking: 'The user wants a greeting.', text: 'Hello **there**, from the scripted model.', chunk_delay_ms: 150 },
        { text: 'Reading it first.', tool_use: { id: 'toolu_read', name: 'Read', input: { file_path: notes } } },
        {
          text: 'Now the edit.',
          tool_use: {
            id: 'toolu_edit',
            name: 'Edit',
            input: { file_path: notes, old_string: 'colour = red', new_string: 'colour = blue' },
          },
        },
        { text: 'Edited.' },
        {
          text: 'Running it.',
          tool_use: { id: 'toolu_bash', name: 'Bash', input: { command: 'echo migrate > migrated.txt', description: 'migrate' } },
        },
        { text: 'Understood.' },
        { text: 'One question.', tool_use: { id: 'toolu_ask', name: 'AskUserQuestion', input: { questions: [QUESTION] } } },
        { text: 'SQLite it is.' },
        { text: 'I see a red dot.' },
        { text: COUNT, chunk_delay_ms: 120 },
      ],
    });
    const env = claudeTestEnv({ home: home.path, baseUrl: fake.url });
    up = startTether(
      ['up', '--port', '0', '--engine', 'claude', '--engine-command', claudeBinaryPath(), '--cwd', cwd.path, '--state-dir', state.path],
      { env },
    );
    link = (await up.line('sign-in: ', 30_000)).split(' ')[1];
    pageUrl = new URL(link).origin;
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await up?.stop('SIGTERM');
    await fake?.close();
    for (const d of [cwd, home, state]) d?.cleanup();
  });

  it('one session, driven from two browsers: streaming, an Edit diff allowed by the other, deny with a message, a question, an image, a cut network, a viewer', async () => {
    const alice = await person(browser);
    await signIn(alice.page, link);
    const used = await person(browser);
    await used.page.goto(link);
    await used.page.getByRole('alert').filter({ hasText: 'already used' }).waitFor();
    await used.context.close();

    const id = await startSession(alice.page);
    await sendPrompt(alice.page, 'Say hello');
    await alice.page.locator('.md.streaming').waitFor();
    await alice.page.locator('[data-testid=assistant-text] strong').filter({ hasText: 'there' }).waitFor(); // markdown, rendered
    const thinking = alice.page.locator('details.thinking');
    await thinking.waitFor();
    expect(await thinking.getAttribute('open')).toBeNull(); // folded until opened
    expect(await thinking.locator('p').textContent()).toBe('The user wants a greeting.');

    // Two controllers; an Edit asks permission and shows as a diff; bob allows, alice's card goes.
    const bob = await person(browser);
    await signIn(bob.page, await linkFor('bob'));
    await openFromDashboard(bob.page, id, 'Open');
    await sendPrompt(alice.page, 'Change the colour in notes.txt to blue');
    for (const p of [alice.page, bob.page]) {
      const card = p.getByTestId('permission-card');
      await card.waitFor();
      await card.locator('.diff .del').filter({ hasText: 'colour = red' }).waitFor();
      await card.locator('.diff .add').filter({ hasText: 'colour = blue' }).waitFor();
    }
    const files = await screenshots(
      browser,
      'transcript-permission-diff',
      () => linkFor('alice'),
      async (page) => {
        await openFromDashboard(page, id, 'Open');
        await page.getByTestId('permission-card').waitFor();
      },
    );
    expect(files).toHaveLength(4);
    await bob.page.getByTestId('permission-card').getByRole('button', { name: 'Allow', exact: true }).click();
    await alice.page.getByTestId('prompt-decided').filter({ hasText: 'Edit: allowed by bob' }).waitFor();
    expect(await alice.page.getByTestId('permission-card').count()).toBe(0);
    await alice.page.getByText('Edited.').waitFor();
    expect(readFileSync(notes, 'utf8')).toBe('title = demo\ncolour = blue\nsize = 3\n');
    expect(fake.lastToolResults().filter((r) => r.tool_use_id === 'toolu_edit')).toHaveLength(1); // the tool ran once
    await bob.context.close();

    // Deny with a message: the model reads it in the tool result.
    await sendPrompt(alice.page, 'Run the migration');
    const card = alice.page.getByTestId('permission-card');
    await card.getByRole('button', { name: 'Deny with message…' }).click();
    await card.getByLabel('Message for the model').fill('use the staging database instead');
    await card.locator('form').getByRole('button', { name: 'Deny' }).click();
    await alice.page.getByText('Understood.').waitFor();
    const denied = fake.lastToolResults().find((r) => r.tool_use_id === 'toolu_bash');
    expect(denied?.is_error).toBe(true);
    expect(denied?.content).toContain('use the staging database instead');
    expect(existsSync(join(cwd.path, 'migrated.txt'))).toBe(false);

    // AskUserQuestion: the option picked reaches the model.
    await sendPrompt(alice.page, 'Ask me which database');
    const q = alice.page.getByTestId('question-card');
    await q.getByRole('button', { name: /SQLite/ }).click();
    await q.getByRole('button', { name: 'Answer' }).click();
    await alice.page.getByText('SQLite it is.').waitFor();
    expect(fake.lastToolResults().find((r) => r.tool_use_id === 'toolu_ask')?.content).toContain('SQLite');

    // A pasted image arrives at the Messages API as an image block.
    await pasteImage(alice.page, TINY_PNG);
    await sendPrompt(alice.page, 'What is in this picture?');
    await alice.page.getByText('I see a red dot.').waitFor();
    const last = fake.modelRequests().at(-1)!.lastMessage!.content as { type: string; source?: { media_type?: string; data?: string } }[];
    const image = last.find((b) => b.type === 'image');
    expect(image?.source).toMatchObject({ media_type: 'image/png', data: TINY_PNG });

    // The network cut mid-stream and restored: complete, nothing doubled.
    await sendPrompt(alice.page, 'Count for me');
    await alice.page.locator('.md.streaming').filter({ hasText: 'word1' }).waitFor();
    await alice.context.setOffline(true);
    await alice.page.getByTestId('link-banner').waitFor();
    await alice.page.waitForTimeout(2_000);
    await alice.context.setOffline(false);
    await alice.page.getByTestId('link-banner').waitFor({ state: 'detached' });
    await alice.page.getByTestId('assistant-text').filter({ hasText: 'word24' }).waitFor();
    const texts = (await alice.page.getByTestId('assistant-text').allTextContents()).map((t) => t.trim());
    expect(texts.filter((t) => t.includes('word1 '))).toEqual([COUNT]);
    expect(texts.filter((t) => t === 'Edited.')).toHaveLength(1);
    const seqs = await exportedSeqs(alice.page);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));

    // A viewer sees it all and can change nothing.
    const victor = await person(browser);
    await signIn(victor.page, await linkFor('victor'));
    await openFromDashboard(victor.page, id, 'Watch');
    await victor.page.getByTestId('read-only').waitFor();
    await victor.page.getByText('SQLite it is.').waitFor();
    expect(await victor.page.locator('#prompt').count()).toBe(0);
    for (const name of ['Interrupt', 'Send', 'Allow']) expect(await victor.page.getByRole('button', { name, exact: true }).count()).toBe(0);
    expect(alice.errors).toEqual([]);
    expect(victor.errors).toEqual([]);
    await victor.context.close();
    await alice.context.close();
  }, 120_000);
});
