import { afterEach, describe, expect, it, vi } from 'vitest';
import { ControlRouting, MAX_IN_FLIGHT, restoreRequestId } from '../gateway/session/control-routing.js';

describe('control routing', () => {
  it('keeps two clients apart under the same request_id and restores each id byte for byte', () => {
    const r = new ControlRouting();
    const a = r.open('c1', 'alice', 'same');
    const b = r.open('c2', 'bob', 'same');
    expect(a).not.toBe(b);
    const line = (id: string) => `{"type":"control_response","response":{"subtype":"success","request_id":"${id}","response":{"x":1.0}}}`;
    expect(r.answer(b, line(b), () => true)).toEqual({ kind: 'deliver', clientId: 'c2', line: line('same') });
    expect(r.answer(a, line(a), () => true)).toEqual({ kind: 'deliver', clientId: 'c1', line: line('same') });
    expect(r.answer(a, line(a), () => true)).toEqual({ kind: 'not-ours' });
  });

  it('holds answers for a client that is away and hands them only to the same principal', () => {
    const r = new ControlRouting();
    const id = r.open('old', 'alice', 'q1');
    expect(r.answer(id, `{"response":{"request_id":"${id}"}}`, () => false)).toEqual({ kind: 'held' });
    expect(r.takeOver('old', 'new', 'mallory')).toEqual([]);
    expect(r.takeOver('old', 'new', 'alice')).toEqual(['{"response":{"request_id":"q1"}}']);
    expect(r.takeOver('old', 'new', 'alice')).toEqual([]);
  });

  it('bounds the requests in flight and frees a slot when one is forgotten or answered', () => {
    const r = new ControlRouting();
    const ids = Array.from({ length: MAX_IN_FLIGHT }, (_, i) => r.open('c', 'p', i));
    expect(() => r.open('c', 'p', 'one more')).toThrow(expect.objectContaining({ code: 'RESOURCE_EXHAUSTED' }));
    r.forget(ids[0]);
    const again = r.open('c', 'p', 'now fits');
    r.answer(ids[1], `{"response":{"request_id":"${ids[1]}"}}`, () => true);
    expect(r.open('c', 'p', 'and this')).not.toBe(again);
  });

  it('removes the request_id when the client sent none', () => {
    expect(
      JSON.parse(
        restoreRequestId('{"type":"control_response","response":{"request_id":"tether-1","subtype":"success"}}', 'tether-1', undefined),
      ),
    ).toEqual({
      type: 'control_response',
      response: { subtype: 'success' },
    });
  });

  describe('watching that the engine answers (fake clock)', () => {
    afterEach(() => vi.useRealTimers());
    const watched = (counts = true) => {
      const events: string[] = [];
      const r = new ControlRouting({
        answerWithinMs: 1_000,
        onOverdue: (subtype, waitedMs) => {
          events.push(`overdue ${subtype} ${waitedMs}`);
          return counts;
        },
        onCaughtUp: () => events.push('caught up'),
      });
      return { r, events };
    };
    const reply = (id: string) => `{"response":{"request_id":"${id}"}}`;

    it('reports a request unanswered past the bound once, and the engine catching up once every overdue one is answered', () => {
      vi.useFakeTimers();
      const { r, events } = watched();
      const a = r.open('c', 'p', 'a', 'interrupt');
      const b = r.open('c', 'p', 'b', 'set_model');
      vi.advanceTimersByTime(999);
      expect(events).toEqual([]);
      vi.advanceTimersByTime(1);
      expect(events).toEqual(['overdue interrupt 1000', 'overdue set_model 1000']);
      expect(r.overdue).toBe(2);
      vi.advanceTimersByTime(10_000);
      expect(events).toHaveLength(2); // once per request
      r.answer(a, reply(a), () => true);
      expect(events).toHaveLength(2);
      r.forget(b);
      expect(events.at(-1)).toBe('caught up');
      expect(r.overdue).toBe(0);
    });

    it('an answer in time reports nothing; a request that may not count yet is watched again; clear() stops every timer', () => {
      vi.useFakeTimers();
      const { r, events } = watched();
      const a = r.open('c', 'p', 'a', 'interrupt');
      vi.advanceTimersByTime(500);
      r.answer(a, reply(a), () => true);
      vi.advanceTimersByTime(5_000);
      expect(events).toEqual([]);
      const later = watched(false);
      later.r.open('c', 'p', 'x', 'interrupt');
      vi.advanceTimersByTime(2_500);
      expect(later.events).toEqual(['overdue interrupt 1000', 'overdue interrupt 2000']);
      expect(later.r.overdue).toBe(0);
      later.r.clear();
      vi.advanceTimersByTime(5_000);
      expect(later.events).toHaveLength(2);
    });
  });
});
