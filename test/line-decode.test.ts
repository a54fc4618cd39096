/**
 * The agent decodes each engine line without TextDecoder (agent/line-splitter.ts: ASCII copied
 * as it is, anything else checked as UTF-8 first): what it accepts and the text it makes are
 * exactly a fatal TextDecoder's that keeps a BOM, on random lines full of the hard cases.
 */
import { describe, expect, it } from 'vitest';
import { decodeLine } from '../agent/line-splitter.js';

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Pieces that make a line interesting for a UTF-8 decoder. */
const PIECES = [
  'a',
  ' ',
  '"',
  '\\',
  '\u00e9',
  '\u20ac',
  '\u{1f600}',
  '\ufeff', // ASCII, 2-, 3- and 4-byte, a BOM
  [0xed, 0xa0, 0x80], // an encoded surrogate (CESU-8): not UTF-8
  [0xc0, 0xaf], // an overlong '/'
  [0xe2, 0x82], // a truncated sequence
  [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
  [0x80], // a lone continuation byte
  [0xff],
].map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p)));

describe('decoding an engine line', () => {
  it('accepts and decodes exactly what a fatal TextDecoder does', () => {
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n;
    let frames = 0;
    for (let i = 0; i < 5_000; i++) {
      const parts = [Buffer.from('{"t":"')];
      for (let k = rnd(12); k >= 0; k--) parts.push(PIECES[rnd(PIECES.length)]);
      parts.push(Buffer.from('"}'));
      const raw = Buffer.concat(parts);
      let want: string | undefined;
      try {
        want = decoder.decode(raw);
      } catch {
        want = undefined;
      }
      const got = decodeLine(raw);
      if (want === undefined) {
        expect(got && got.kind === 'invalid' && got.code).toBe('INVALID_UTF8');
        continue;
      }
      // Valid UTF-8: a frame exactly when the text is a JSON object, with the same text.
      expect(got?.kind, want).toBe(isJsonObject(want) ? 'frame' : 'invalid');
      if (got?.kind === 'frame') {
        expect(got.line).toBe(want);
        frames++;
      } else expect(got && got.kind === 'invalid' && got.code).not.toBe('INVALID_UTF8');
    }
    expect(frames).toBeGreaterThan(500); // the generator makes plenty of valid lines
  });
});

function isJsonObject(text: string): boolean {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v);
  } catch {
    return false;
  }
}
