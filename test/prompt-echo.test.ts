/**
 * The poster's own prompt echo goes out at once, as every member's does: it never waits for the
 * engine's answer. Over every pair of client × agent transport, with an engine that stays
 * silent: the poster still gets its echo (its send() resolves) within a bound, a viewer gets it
 * too, and every member sees the session's frames in seq order, echoes and answers alike.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { startStack, TRANSPORT_PAIRS, withTimeout, type Stack } from './support/stack.js';
import { until } from './support/items.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';

const QUIET_ENGINE = fileURLToPath(new URL('./support/quiet-engine.mjs', import.meta.url));
/**
 * How long a silent engine's poster may wait for its echo here: a loaded machine's scheduling.
 * An echo held until the engine answered would never come (this engine stays silent): the test
 * would fail, not wait.
 */
const ECHO_BOUND_MS = 2_000;

const isPromptEcho = (text: string) => (i: SessionItem) =>
  i.kind === 'event' && i.event.subtype === 'prompt' && JSON.stringify(i.event.message).includes(text);
const isAnswer = (i: SessionItem) => i.kind === 'engine' && i.message.type === 'result';
const seqOf = (i: SessionItem) => ('seq' in i ? i.seq : undefined);

describe.each(TRANSPORT_PAIRS)(
  'the poster’s prompt echo: client over $client, agent over $agent',
  ({ client: clientTransport, agent: agentTransport }) => {
    let stack: Stack | undefined;
    let cwd: TempDir | undefined;
    afterEach(async () => {
      await stack?.stop();
      stack = undefined;
      cwd?.cleanup();
    });

    it('reaches the poster within the bound while the engine stays silent, reaches a viewer, and keeps seq order for both', async () => {
      cwd = makeTempDir('tether-echo-'); // the quiet engine writes prompts.log in its working folder
      stack = await startStack({
        engine: 'claude',
        engineCommand: QUIET_ENGINE,
        cwd: cwd.path,
        auth: 'off',
        clientTransport,
        agentTransport,
      });
      const poster = await stack.client();
      const session = await withTimeout(poster.createSession({ agent: 'test-agent' }), 20_000, 'create');
      const viewerClient = await stack.client();
      const viewer = await withTimeout(viewerClient.attach(session.id, { readOnly: true }), 10_000, 'attach the viewer');
      const posterItems: SessionItem[] = [];
      const viewerItems: SessionItem[] = [];
      const posterIt = session[Symbol.asyncIterator]();
      const viewerIt = viewer[Symbol.asyncIterator]();

      for (const text of ['silent one', 'silent two']) {
        const t0 = performance.now();
        expect(await withTimeout(session.sendUserMessage(text), ECHO_BOUND_MS, `the echo of "${text}" answering send()`)).toBe('applied');
        const waited = performance.now() - t0;
        expect(waited).toBeLessThan(ECHO_BOUND_MS);
        await until(posterIt, isPromptEcho(text), posterItems, ECHO_BOUND_MS, `the poster's echo of "${text}"`);
        await until(viewerIt, isPromptEcho(text), viewerItems, ECHO_BOUND_MS, `the viewer's echo of "${text}"`);
      }
      // An engine that answers: echo and answer reach both, the echo first.
      expect(await withTimeout(session.sendUserMessage('answer'), 10_000, 'the echo of "answer"')).toBe('applied');
      await until(posterIt, isAnswer, posterItems, 10_000, "the poster's answer");
      await until(viewerIt, isAnswer, viewerItems, 10_000, "the viewer's answer");

      for (const items of [posterItems, viewerItems]) {
        const seqs = items.map(seqOf).filter((s): s is number => s !== undefined);
        expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
        expect(new Set(seqs).size).toBe(seqs.length);
        const echo = items.findIndex(isPromptEcho('answer'));
        expect(echo).toBeGreaterThanOrEqual(0);
        expect(echo).toBeLessThan(items.findIndex(isAnswer));
      }
      // Both saw the same frames from the viewer's attach on.
      const fromViewer = posterItems.filter((i) => (seqOf(i) ?? 0) >= (seqOf(viewerItems[0]) ?? Infinity));
      expect(viewerItems.map(seqOf)).toEqual(fromViewer.map(seqOf));
    }, 60_000);
  },
);
