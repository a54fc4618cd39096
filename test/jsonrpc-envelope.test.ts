import { describe, expect, it } from 'vitest';
import { readMessage } from '../gateway/dialects/jsonrpc/envelope.js';

/** How the dialect reads one client frame (the wire side is tested in jsonrpc-dialect.test.ts). */
describe('JSON-RPC dialect envelope', () => {
  it.each([
    ['{not json', null, -32700],
    ['[{"jsonrpc":"2.0","id":1,"method":"session_list"}]', null, -32600],
    ['"text"', null, -32600],
    ['{"id":7,"method":"session_list"}', 7, -32600],
    ['{"jsonrpc":"2.0","id":"a","method":3}', 'a', -32600],
    ['{"jsonrpc":"2.0","id":{"x":1},"method":"session_list"}', null, -32600],
    ['{"jsonrpc":"2.0","id":1.5,"method":"session_list"}', null, -32600],
    ['{"jsonrpc":"2.0","id":9}', 9, -32600],
  ])('%s is invalid (id %s, code %s)', (text, id, code) => {
    expect(readMessage(text)).toMatchObject({ kind: 'invalid', id, code });
  });

  it('reads requests, responses and notifications', () => {
    expect(readMessage('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0"}}')).toEqual({ kind: 'request', id: 1, method: 'initialize', params: { protocol_version: '1.0' } });
    expect(readMessage('{"jsonrpc":"2.0","id":"g-1","result":{"decision":"allow"}}')).toEqual({ kind: 'response', id: 'g-1', result: { decision: 'allow' }, error: undefined });
    expect(readMessage('{"jsonrpc":"2.0","id":"g-2","error":{"code":-1,"message":"no"}}')).toMatchObject({ kind: 'response', id: 'g-2', error: { code: -1, message: 'no' } });
    expect(readMessage('{"jsonrpc":"2.0","method":"anything"}')).toEqual({ kind: 'notification' });
  });
});
