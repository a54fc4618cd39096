/**
 * EndOfTurn: what the channels of one listener share to write a turn's frames together. Each
 * listed item ends its turn once, at the turn's end, with one tick for all; an item listed
 * while they run waits for the next turn; two EndOfTurns know nothing of each other.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EndOfTurn, type TurnEnd } from '../core/channel/end-of-turn.js';

/** An item that records, into `log`, each time its turn ends. */
function item(name: string, log: string[], then?: () => void): TurnEnd {
  return {
    endTurn: () => {
      log.push(name);
      then?.();
    },
  };
}

/** Resolves after every process.nextTick queued so far has run (setImmediate runs after them). */
const afterTicks = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('EndOfTurn', () => {
  afterEach(() => vi.restoreAllMocks());

  it('ends the turn of every item listed in it, in order, after the turn and with one tick for all', async () => {
    const log: string[] = [];
    const turn = new EndOfTurn();
    const ticks = vi.spyOn(process, 'nextTick');
    for (const name of ['a', 'b', 'c']) turn.add(item(name, log));
    expect(log).toEqual([]); // not during the turn
    expect(ticks).toHaveBeenCalledTimes(1);
    await afterTicks();
    expect(log).toEqual(['a', 'b', 'c']);
  });

  it('an item listed while the turn ends waits for the end of the next turn', async () => {
    const log: string[] = [];
    const turn = new EndOfTurn();
    const late = item('late', log);
    turn.add(item('first', log, () => turn.add(late)));
    await afterTicks();
    expect(log).toEqual(['first', 'late']); // the late one ran on a tick of its own, once
    await afterTicks();
    expect(log).toEqual(['first', 'late']);
  });

  it('two EndOfTurns (two listeners) keep their own lists: each ends only its own items, each with its own tick', async () => {
    const log: string[] = [];
    const [one, two] = [new EndOfTurn(), new EndOfTurn()];
    const ticks = vi.spyOn(process, 'nextTick');
    one.add(item('one', log));
    two.add(item('two', log));
    expect(ticks).toHaveBeenCalledTimes(2);
    await afterTicks();
    expect(log.sort()).toEqual(['one', 'two']);
  });
});
