import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const SRC = new URL('../client/web/src/', import.meta.url);

/** The page keeps no copies of wire facts: it reads them from their one home in core/. */
describe('web page: wire facts from core/', () => {
  it('the page has no error class of its own: its errors are TetherErrors (core/errors.ts), retryable as the error table says', () => {
    for (const f of readdirSync(SRC))
      expect([f, /class \w+ extends Error\b/.test(readFileSync(new URL(f, SRC), 'utf8'))]).toEqual([f, false]);
  });

  it('the page speaks JSON-RPC through the one engine (core/rpc/engine.ts), not a parser of its own', () => {
    const rpc = readFileSync(new URL('rpc.ts', SRC), 'utf8');
    expect(rpc).toContain("from '../../../core/rpc/engine.js'");
    for (const f of readdirSync(SRC)) expect([f, /JSON\.parse\(e\.data\)/.test(readFileSync(new URL(f, SRC), 'utf8'))]).toEqual([f, false]);
  });

  it('no HTTP path of the gateway is spelled out in the page source', () => {
    for (const f of readdirSync(SRC)) expect([f, /['"`]\/v1\//.test(readFileSync(new URL(f, SRC), 'utf8'))]).toEqual([f, false]);
  });
});
