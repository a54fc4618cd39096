/**
 * stampUserMessage (gateway/session/turns/turn-authors.ts), the one place a user message gets
 * its uuid and origin: a copy with the sender's keys in their order, never the sender's object
 * changed, and a line with an own `__proto__` key copied as data (the copy's prototype stays
 * Object.prototype and the key is still there for the engine).
 */
import { describe, expect, it } from 'vitest';
import { stampUserMessage } from '../gateway/session/turns/turn-authors.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('stampUserMessage', () => {
  it('adds a fresh uuid and a human origin after the sent keys, leaving the sent line as it was', () => {
    const sent = JSON.parse('{"type":"user","message":{"role":"user","content":"hi"},"parent_tool_use_id":null}');
    const out = stampUserMessage(sent);
    expect(Object.keys(out)).toEqual(['type', 'message', 'parent_tool_use_id', 'uuid', 'origin']);
    expect(out.uuid).toMatch(UUID);
    expect(out.origin).toEqual({ kind: 'human' });
    expect(out.message).toBe(sent.message);
    expect(Object.keys(sent)).toEqual(['type', 'message', 'parent_tool_use_id']);
  });

  it("keeps the sender's uuid and origin where they were", () => {
    const uuid = '0f0e0d0c-0b0a-4908-8706-050403020100';
    const sent = { type: 'user', uuid, origin: { kind: 'task' }, message: { role: 'user', content: 'hi' } };
    const out = stampUserMessage(sent);
    expect(out).not.toBe(sent);
    expect(JSON.stringify(out)).toBe(JSON.stringify(sent));
  });

  it('copies an own __proto__ key as data: no prototype set, the key kept', () => {
    const sent = JSON.parse('{"type":"user","__proto__":{"polluted":true},"message":{"role":"user","content":"hi"}}');
    const out = stampUserMessage(sent);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect((out as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    expect(JSON.stringify(out)).toContain('"__proto__":{"polluted":true}');
  });

  it('refuses a uuid that is not a UUID', () => {
    expect(() => stampUserMessage({ type: 'user', uuid: 'nope' })).toThrow(/must be a UUID/);
  });
});
