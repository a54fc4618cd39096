/**
 * Issue 32, a graceful restart at the relay: from the first user message after holdNewTurns,
 * inputs are neither written nor acknowledged (the gateway keeps them for the next engine),
 * what a running turn needs before that still goes through, and an engine handed over exits
 * without an `exited` event (so its session is not ended).
 */
import { describe, expect, it } from 'vitest';
import type { ExitInfo } from '../agent/engine-process.js';
import type { EngineLine } from '../agent/line-splitter.js';
import { SessionRelay, type Outgoing } from '../agent/session-relay.js';
import { silentLogger } from '../core/logging.js';

/** An engine that records what it is written and says what the test pushes, then exits when told. */
class ScriptedEngine {
  readonly written: Record<string, unknown>[] = [];
  private readonly queue: (EngineLine | 'end')[] = [];
  private wake: (() => void) | undefined;
  private exit!: (e: ExitInfo) => void;
  readonly exited = new Promise<ExitInfo>((r) => (this.exit = r));
  say(value: Record<string, unknown>): void {
    const line = JSON.stringify(value);
    this.queue.push({ kind: 'frame', line, bytes: Buffer.from(line), value });
    this.wake?.();
  }
  end(): void {
    this.queue.push('end');
    this.wake?.();
    this.exit({ code: 0, signal: null, stderrTail: '' });
  }
  async *lines(): AsyncIterable<EngineLine> {
    for (;;) {
      const item = this.queue.shift();
      if (item === 'end') return;
      if (item) yield item;
      else await new Promise<void>((r) => (this.wake = r));
    }
  }
  async write(line: Record<string, unknown>): Promise<void> {
    this.written.push(line);
  }
}

const user = (text: string) => ({ type: 'user', message: { role: 'user', content: text } });
const answer = {
  type: 'control_response',
  response: { subtype: 'success', request_id: 'perm-1', response: { behavior: 'allow', updatedInput: {} } },
};

describe('a relay during a graceful restart', () => {
  it('lets the running turn finish, holds the next prompt and all after it unacknowledged, and reports no exit when handed over', async () => {
    const engine = new ScriptedEngine();
    const relay = new SessionRelay('s', engine, silentLogger);
    const sent: Outgoing[] = [];
    const acked: number[] = [];
    relay.setSink({ send: (_id, item) => sent.push(item), ackInput: (_id, seq) => acked.push(seq) });

    await relay.input(1, user('first'));
    expect(relay.turnRunning).toBe(true);
    relay.holdNewTurns();
    await relay.input(2, answer); // the running turn's permission answer still goes through
    await relay.input(3, user('second')); // would start a turn: held for the next engine
    await relay.input(4, answer); // after a held input: held too, so order is kept
    expect(engine.written.map((l) => l.type)).toEqual(['user', 'control_response']);
    expect(acked).toEqual([1, 2]);
    expect(relay.lastAppliedInputSeq).toBe(2);

    engine.say({ type: 'result', subtype: 'success', is_error: false });
    await expect.poll(() => relay.turnRunning).toBe(false);
    relay.handOver();
    engine.end();
    await relay.done;
    expect(sent.map((i) => (i.kind === 'line' ? i.meta.type : i.event.subtype))).toEqual(['result']);
  });

  it('without a hand-over, an engine that exits is reported (the session ends)', async () => {
    const engine = new ScriptedEngine();
    const relay = new SessionRelay('s', engine, silentLogger);
    const sent: Outgoing[] = [];
    relay.setSink({ send: (_id, item) => sent.push(item), ackInput: () => {} });
    engine.end();
    await relay.done;
    expect(sent.map((i) => (i.kind === 'event' ? i.event.subtype : i.kind))).toEqual(['exited']);
  });
});
