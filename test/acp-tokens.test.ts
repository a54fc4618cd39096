/**
 * `/acp` connections end with their token like every other connection (issue 27, item 13):
 * revoked (`tether revoke`) or expired, the editor is told (`_tether/connection_closing`) and
 * the WebSocket closes within a second with the error table's close code.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { acpEndpoint } from '../bin/acp-endpoint.js';
import { generateTokenKey } from '../core/auth/keygen.js';
import { mintToken } from '../core/auth/mint.js';
import { TokenVerifier } from '../core/auth/verify.js';
import { Gateway } from '../gateway/gateway.js';
import { ACP_CLOSING_NOTIFICATION } from '../gateway/listen/acp-gate.js';
import { RevocationList } from '../gateway/door/revocations.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { runTether } from './support/cli.js';
import { withTimeout } from './support/wait.js';

const key = generateTokenKey('HS256').key;
let dir: string;
let server: GatewayServer;
let revocations: RevocationList;
const sockets: WebSocket[] = [];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tether-acp-tokens-'));
  revocations = RevocationList.inStateDir(dir);
  const verifier = new TokenVerifier({ keys: [key], clockToleranceSec: 0 });
  server = await startGatewayServer(new Gateway(), { port: 0, auth: { verifier }, revocations, acp: acpEndpoint() });
});

afterEach(async () => {
  for (const ws of sockets.splice(0)) ws.terminate();
  await server.close();
  revocations.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An initialized `/acp` connection: what it was told and how it closed. */
async function openAcp(token: string) {
  const ws = new WebSocket(`${server.url}/acp`, { headers: { authorization: `Bearer ${token}` } });
  sockets.push(ws);
  const told: Record<string, any>[] = [];
  ws.on('message', (d) => told.push(JSON.parse(String(d))));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  await withTimeout(new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject)), 5_000, 'the /acp upgrade');
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } }));
  await withTimeout(
    (async () => {
      while (!told.some((m) => m.id === 1)) await new Promise((r) => setTimeout(r, 10));
    })(),
    5_000,
    'the initialize answer',
  );
  return { told, closed };
}

describe('/acp and the token it was opened with', () => {
  it('a token revoked with tether revoke closes its /acp connection within a second, the editor told why', async () => {
    const token = await mintToken({ key, kind: 'client', sub: 'alice', ttlSeconds: 3600 });
    const other = await openAcp(await mintToken({ key, kind: 'client', sub: 'bob', ttlSeconds: 3600 }));
    const acp = await openAcp(token);
    const r = await runTether(['revoke', '--state-dir', dir, '--jti', String(decodeJwt(token).jti)]);
    expect(r.code).toBe(0);
    const t0 = Date.now();
    const closed = await withTimeout(acp.closed, 1_000, 'the /acp close after tether revoke');
    console.log(`[acp-tokens] revoked: closed ${Date.now() - t0} ms after tether revoke returned`);
    expect(closed).toEqual({ code: 4403, reason: 'token revoked' });
    expect(acp.told.find((m) => m.method === ACP_CLOSING_NOTIFICATION)?.params).toEqual({
      code: 'PERMISSION_DENIED',
      message: 'token revoked',
    });
    expect(other.told.some((m) => m.method === ACP_CLOSING_NOTIFICATION)).toBe(false); // another token's connection stays
  }, 30_000);

  it('an expired token closes its /acp connection within a second of exp, the editor told why', async () => {
    const token = await mintToken({ key, kind: 'client', sub: 'alice', ttlSeconds: 2 });
    const acp = await openAcp(token);
    const expMs = Number(decodeJwt(token).exp) * 1000;
    const closed = await withTimeout(acp.closed, expMs - Date.now() + 1_000, 'the /acp close at expiry');
    console.log(`[acp-tokens] expired: closed ${Date.now() - expMs} ms after exp`);
    expect(closed.code).toBe(4401);
    expect(closed.reason).toContain('token expired');
    expect(acp.told.find((m) => m.method === ACP_CLOSING_NOTIFICATION)?.params).toMatchObject({ code: 'UNAUTHENTICATED' });
  }, 30_000);
});
