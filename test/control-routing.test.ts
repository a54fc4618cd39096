import { describe, expect, it } from 'vitest';
import { ControlRouting, MAX_IN_FLIGHT, restoreRequestId } from '../gateway/control-routing.js';

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
    expect(JSON.parse(restoreRequestId('{"type":"control_response","response":{"request_id":"tether-1","subtype":"success"}}', 'tether-1', undefined))).toEqual({
      type: 'control_response',
      response: { subtype: 'success' },
    });
  });
});
