/**
 * The session.frame layout: what a SessionFrameWriter writes, an EngineFrameReader reads back without
 * parsing the line, by a fast path for the gateway's own header and JSON.parse for any other
 * spelling of the same three fields; anything else is left to ordinary JSON-RPC parsing.
 */
import { describe, expect, it } from 'vitest';
import { encodeEventFrame, encodeLineFrame, EngineFrameReader, readEngineFrame, SessionFrameWriter } from '../core/wire/session-frame.js';
import { tetherEvent } from '../core/protocol/events.js';

const LINE = '{"type" : "assistant","text":"caf\\u00e9 \\/ é"}';

describe('session.frame layout', () => {
  it('reads back what the gateway writes: the same session, seq, origin and line bytes, for one session after another', () => {
    const reader = new EngineFrameReader(); // one for all: it remembers the id read last
    const writers = new Map<string, SessionFrameWriter>();
    for (const [id, seq, origin] of [
      ['s-1', 1, 'engine'],
      ['3f1c2a9e-1b2c-4d5e-8f90-123456789abc', 9_007_199_254_740_991, 'gateway'],
      ['s-1', 10, 'engine'],
      ['s-10', 11, 'engine'], // the last id read is a prefix of this one
      ['s-1', 12, 'engine'],
      ['q"\\é', 0, 'engine'], // escapes in the id: read through JSON.parse
    ] as const) {
      const writer = writers.get(id) ?? writers.set(id, new SessionFrameWriter(id)).get(id)!;
      const frame = writer.encodeLine(seq, origin, Buffer.from(LINE));
      const text = frame.toString('utf8');
      expect(JSON.parse(text)).toEqual({
        jsonrpc: '2.0',
        method: 'session.frame',
        params: { session_id: id, seq, origin, message: JSON.parse(LINE) },
      });
      expect(reader.read(text)).toEqual({ session_id: id, seq, origin, line: LINE });
      // The one-off functions write and read the same bytes as the session's writer and the connection's reader.
      expect(encodeLineFrame(id, seq, origin, Buffer.from(LINE)).toString('utf8')).toBe(text);
      expect(readEngineFrame(text)).toEqual(reader.read(text));
    }
  });

  it('keeps what a writer or a reader remembers to itself: interleaved sessions and connections read right', () => {
    const [a, b] = [new SessionFrameWriter('s-1'), new SessionFrameWriter('s-10')];
    const [readerA, readerB] = [new EngineFrameReader(), new EngineFrameReader()];
    const event = { type: 'tether', subtype: 'state', state: 'idle', at: 'now' } as const;
    for (let seq = 1; seq <= 4; seq++) {
      const fromA = a.encodeLine(seq, 'engine', Buffer.from(LINE)).toString('utf8');
      const fromB = b.encodeLine(seq, 'gateway', Buffer.from(LINE)).toString('utf8');
      expect(readerA.read(fromA)).toEqual({ session_id: 's-1', seq, origin: 'engine', line: LINE });
      expect(readerB.read(fromB)).toEqual({ session_id: 's-10', seq, origin: 'gateway', line: LINE });
      expect(readerA.read(fromB)).toEqual({ session_id: 's-10', seq, origin: 'gateway', line: LINE }); // 's-1' is a prefix of 's-10'
      expect(readerB.read(fromA)).toEqual({ session_id: 's-1', seq, origin: 'engine', line: LINE });
      expect(JSON.parse(a.encodeEvent(seq, event).toString('utf8')).params).toEqual({ session_id: 's-1', seq, origin: 'gateway', event });
      expect(JSON.parse(b.encodeEvent(seq, event).toString('utf8')).params).toEqual({ session_id: 's-10', seq, origin: 'gateway', event });
    }
  });

  it('reads the same fields spelled another way, and declines what is not a line frame', () => {
    const prefix = '{"jsonrpc":"2.0","method":"session.frame","params":{';
    expect(readEngineFrame(`${prefix}"seq":5, "origin":"engine","session_id":"a","message":${LINE}}}`)).toEqual({
      session_id: 'a',
      seq: 5,
      origin: 'engine',
      line: LINE,
    });
    expect(readEngineFrame(`${prefix}"session_id":"a","seq":05,"origin":"engine","message":${LINE}}}`)).toBeUndefined(); // not JSON
    expect(readEngineFrame(`${prefix}"session_id":"a","seq":5,"origin":"elsewhere","message":${LINE}}}`)).toBeUndefined();
    expect(readEngineFrame(`${prefix}"session_id":"a","seq":5,"origin":"engine","extra":1,"message":${LINE}}}`)).toBeUndefined();
    const event = encodeEventFrame('a', 3, tetherEvent({ subtype: 'state', state: 'idle' })).toString('utf8');
    expect(readEngineFrame(event)).toBeUndefined();
    // An event holding a "message" of its own (a prompt) is still an event frame, not a line.
    const prompt = encodeEventFrame(
      'a',
      4,
      tetherEvent({ subtype: 'prompt', principal: 'p', client_id: 'c-1', message: { role: 'user', content: 'hi' } }),
    ).toString('utf8');
    expect(readEngineFrame(prompt)).toBeUndefined();
    expect(readEngineFrame('{"jsonrpc":"2.0","id":1,"result":{}}')).toBeUndefined();
  });

  it('an event frame owns its memory: not a slice of the shared Buffer pool, which the replay log would keep whole', () => {
    const small = encodeEventFrame('a', 3, tetherEvent({ subtype: 'state', state: 'idle' }));
    expect(small.byteLength).toBeLessThan(Buffer.poolSize / 2); // a size Buffer.from would have sliced from the pool
    expect(small.byteOffset).toBe(0);
    expect(small.buffer.byteLength).toBe(small.byteLength);
    expect(JSON.parse(small.toString('utf8')).params.event).toMatchObject({ subtype: 'state', state: 'idle' });
  });
});
