import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DIALECT_CAPABILITIES,
  DIALECT_CLIENT_REQUESTS,
  DIALECT_NOTIFICATIONS,
  DialectRequests,
  JSONRPC_SUBPROTOCOL,
} from '../core/protocol/jsonrpc-dialect.js';

/** docs/jsonrpc-dialect.md describes every request, notification and capability the code defines. */
describe('docs/jsonrpc-dialect.md', () => {
  const doc = readFileSync(join(__dirname, '..', 'docs', 'jsonrpc-dialect.md'), 'utf8');
  const names = [
    ...Object.keys(DialectRequests),
    ...Object.keys(DIALECT_NOTIFICATIONS),
    ...Object.keys(DIALECT_CLIENT_REQUESTS),
    ...DIALECT_CAPABILITIES,
    JSONRPC_SUBPROTOCOL,
  ];

  it.each(names)('documents %s', (name) => {
    expect(doc).toContain(`\`${name}\``);
  });

  it('the README points to it', () => {
    expect(readFileSync(join(__dirname, '..', 'README.md'), 'utf8')).toContain('(docs/jsonrpc-dialect.md)');
  });
});
