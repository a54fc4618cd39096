/**
 * JSON-RPC 2.0 conformance of every JSON-RPC server the gateway runs (issue 27, item 14): the
 * native protocol (core/rpc/peer.ts), the JSON-RPC dialect (gateway/dialects/jsonrpc/) and ACP
 * at /acp, each over a real WebSocket with nothing but `ws` and JSON.parse on this side.
 * A batch, a wrong `jsonrpc`, or an id that is not a string of at most 128 characters or a
 * safe integer are "Invalid Request" (-32600; id null, or the id when it was readable); a method that is not in the table,
 * including the names of Object.prototype's members, is "Method not found" (-32601), even
 * before hello.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { acpEndpoint } from '../bin/acp-endpoint.js';
import { WS_PATH } from '../core/protocol/http-paths.js';
import { JSONRPC_SUBPROTOCOL } from '../core/protocol/jsonrpc-dialect.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { withTimeout } from './support/wait.js';

let server: GatewayServer;
beforeAll(async () => {
  server = await startGatewayServer(new Gateway(), { port: 0, auth: { verifier: 'off' }, acp: acpEndpoint() });
});
afterAll(async () => {
  await server?.close();
});

/** One raw WebSocket to the gateway: sends a text frame, reads the next JSON answer. */
async function dial(
  kind: 'native' | 'dialect' | 'acp',
): Promise<{ ask: (text: string) => Promise<Record<string, any>>; close: () => void }> {
  const path = kind === 'acp' ? '/acp' : WS_PATH;
  const ws = new WebSocket(`${server.url}${path}`, kind === 'dialect' ? [JSONRPC_SUBPROTOCOL] : []);
  const inbox: Record<string, any>[] = [];
  let wake: (() => void) | undefined;
  ws.on('message', (data) => {
    inbox.push(JSON.parse(String(data)));
    wake?.();
  });
  await withTimeout(new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject)), 5_000, 'the WebSocket to open');
  const next = async () => {
    while (!inbox.length) await withTimeout(new Promise<void>((r) => (wake = r)), 5_000, 'an answer');
    return inbox.shift()!;
  };
  return { ask: (text) => (ws.send(text), next()), close: () => ws.terminate() };
}

const INVALID: [string, string][] = [
  ['a batch', JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'ping' }])],
  ['an empty batch', '[]'],
  ['jsonrpc "1.0"', JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'ping' })],
  ['no jsonrpc', JSON.stringify({ id: 1, method: 'ping' })],
  ['an id of 129 characters', JSON.stringify({ jsonrpc: '2.0', id: 'x'.repeat(129), method: 'ping' })],
  ['an id past the safe integers', '{"jsonrpc":"2.0","id":1e300,"method":"ping"}'],
  ['an object id', JSON.stringify({ jsonrpc: '2.0', id: { a: 1 }, method: 'ping' })],
];
const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];

describe.each(['native', 'dialect', 'acp'] as const)('JSON-RPC conformance: %s', (kind) => {
  it.each(INVALID)('%s is Invalid Request (-32600)', async (_what, text) => {
    const c = await dial(kind);
    try {
      const r = await c.ask(text);
      expect(r).toMatchObject({ jsonrpc: '2.0', error: { code: -32600 } });
      expect([null, 1]).toContain(r.id); // null unless the message had a usable id
    } finally {
      c.close();
    }
  });

  it.each(PROTOTYPE_NAMES)('method %s is Method not found (-32601), before hello', async (method) => {
    const c = await dial(kind);
    try {
      const r = await c.ask(JSON.stringify({ jsonrpc: '2.0', id: 7, method, params: {} }));
      expect(r).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32601 } });
    } finally {
      c.close();
    }
  });
});
