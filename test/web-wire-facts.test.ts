import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, ERROR_TABLE } from '../core/errors.js';
import { RpcError } from '../client/web/src/rpc.js';

const SRC = new URL('../client/web/src/', import.meta.url);

/** The page keeps no copies of wire facts: it reads them from their one home in core/. */
describe('web page: wire facts from core/', () => {
  it('an error is retryable on the page exactly when the error table says so', () => {
    for (const code of ERROR_CODES) expect([code, new RpcError(code, 'x').retryable]).toEqual([code, ERROR_TABLE[code].retryable]);
    expect(new RpcError('SOMETHING_NEW', 'x').retryable).toBe(false);
  });

  it('no HTTP path of the gateway is spelled out in the page source', () => {
    for (const f of readdirSync(SRC)) expect([f, /['"`]\/v1\//.test(readFileSync(new URL(f, SRC), 'utf8'))]).toEqual([f, false]);
  });
});
