/**
 * An engine that stops answering (issue 14): a stand-in engine that never answers interrupt
 * (and ignores stdin EOF and SIGTERM). The interrupt left unanswered past the gateway's bound
 * marks the session `unresponsive`: a state event and an engine_error to every attached
 * client, `tether sessions` shows it, the metric counts it; the owner's stop (staged: EOF,
 * SIGTERM, SIGKILL) ends it and leaves no process behind.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { runTether } from './support/cli.js';
import { isResult, until } from './support/items.js';
import { scrape } from './support/metrics.js';
import { startRig } from './support/start-rig.js';
import { cleanupsPerTest } from './support/cleanups.js';

const DEAF = [process.execPath, fileURLToPath(new URL('./support/misbehaving-engine.mjs', import.meta.url)), '--mode', 'deaf-to-control'];
const isState = (state: string) => (i: SessionItem) => i.kind === 'event' && i.event.subtype === 'state' && i.event.state === state;

describe('an engine that stops answering', () => {
  const cleanups = cleanupsPerTest();

  it('an interrupt left unanswered marks the session unresponsive for every client, in tether sessions and the metrics; the owner stops it', async () => {
    const r = cleanups.own(await startRig({ transport: 'ws', engineArgv: DEAF, limits: { controlAnswerMs: 400 } }));
    const owner = await r.client();
    const s = await owner.createSession({ agent: r.agentName });
    const watcher = await (await r.client()).attach(s.id, { readOnly: true });
    const [io, iw] = [s, watcher].map((x) => x[Symbol.asyncIterator]());
    const seen: SessionItem[][] = [[], []];
    await s.sendUserMessage('hello');
    await until(io, isResult, seen[0], 10_000, 'the engine to answer a prompt');
    // The stand-in never answers this; the gateway's bound is 400 ms.
    const interrupted = s.interrupt().catch((err: Error) => err);
    for (const [n, it] of [io, iw].entries()) await until(it, isState('unresponsive'), seen[n], 5_000, 'the unresponsive state');
    for (const list of seen) {
      const why = list.find((i) => i.kind === 'event' && i.event.subtype === 'engine_error');
      expect(why).toMatchObject({ event: { code: 'UNRESPONSIVE', message: expect.stringContaining('did not answer interrupt') } });
    }
    expect(s.info.state).toBe('unresponsive');
    const listed = await runTether(['sessions'], { env: { TETHER_GATEWAY: r.stack.wsUrl, TETHER_TOKEN: r.stack.token } });
    expect(listed.stdout).toMatch(new RegExp(`${s.id}.*unresponsive`));
    const m = await scrape(r.stack.server.port);
    expect(m.get('tether_engine_unresponsive_total')).toBe(1);
    expect(m.get('tether_sessions{state="unresponsive"}')).toBe(1);
    // A prompt's output does not make it look healthy again: it still owes the interrupt.
    await s.sendUserMessage('still there?');
    await until(io, isResult, seen[0], 10_000, 'the second result');
    expect(r.stack.gateway.directory.get(s.id)!.currentState).toBe('unresponsive');

    expect(r.engine.alive()).toHaveLength(1);
    await s.stop(); // staged: EOF and SIGTERM are ignored, SIGKILL ends it
    await until(io, (i) => i.kind === 'event' && i.event.subtype === 'exited', seen[0], 10_000, 'the exit');
    expect(r.engine.alive()).toEqual([]);
    expect(r.stack.gateway.directory.get(s.id)!.currentState).toBe('ended');
    expect(((await interrupted) as Error).message).toMatch(/session ended|no answer/);
  }, 30_000);

  it('a control request the engine answers in time leaves the session as it was', async () => {
    const r = cleanups.own(await startRig({ transport: 'ws', engineArgv: DEAF, limits: { controlAnswerMs: 400 } }));
    const s = await (await r.client()).createSession({ agent: r.agentName });
    // The stand-in answers initialize: a client's own initialize is a control request like any other.
    await s.request('initialize', { hooks: null }, 5_000);
    await new Promise((res) => setTimeout(res, 600)); // past the bound: nothing may fire for an answered request
    expect(r.stack.gateway.directory.get(s.id)!.currentState).toBe('idle');
    expect((await scrape(r.stack.server.port)).get('tether_engine_unresponsive_total')).toBe(0);
  }, 20_000);
});
