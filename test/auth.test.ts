import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Client, credentials, Metadata } from '@grpc/grpc-js';
import { SignJWT, base64url } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Agent } from '../agent/agent.js';
import { asPermissionRequest } from '../client/permission-policy.js';
import { GatewayClient } from '../client/gateway-client.js';
import { loadGatewayService } from '../core/channel/proto.js';
import { generateTokenKey } from '../core/auth/keygen.js';
import { TOKEN_TYP } from '../core/auth/token-kinds.js';
import { dial } from '../core/link/dial.js';
import { createLogger } from '../core/logging.js';
import { PROTOCOL_VERSION } from '../core/protocol/version.js';
import { RpcPeer } from '../core/rpc/peer.js';
import type { Gateway } from '../gateway/gateway.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { codeOf, isCanUseTool, until, rejectionOf } from './support/items.js';
import { startStack, type Stack } from './support/stack.js';
import { waitFor } from './support/wait.js';

/**
 * Nobody gets in who shouldn't (issue 4; threats.md 2A, 2I). Every bad credential is tried
 * over WebSocket and over gRPC against a real gateway with a demo agent, and each must be
 * refused with a clear error, leaving no session, agent registration or frame behind. Every
 * log line written by gateway, agents and clients during the suite is captured and scanned
 * for tokens and tickets at the end.
 */

const lines: string[] = [];
const logger = createLogger({ level: 'trace', destination: { write: (msg: string) => void lines.push(msg) } });
/** Every token and ticket this suite handled: none may appear in a log line. */
const secrets = new Set<string>();
const track = (t: string) => (secrets.add(t), t);

/** The gateway's frozen clock: token times are exact, whatever the wall clock does meanwhile. */
const FROZEN = new Date();
const T = Math.floor(FROZEN.getTime() / 1000);
const ALLOWED = 'https://app.example';
const OTHER_ALLOWED = 'https://other.example';

function stackFor(transport: 'ws' | 'grpc', cwd: string): Promise<Stack> {
  return startStack({
    engine: 'demo',
    cwd,
    clientTransport: transport,
    agentTransport: transport,
    logger,
    auth: { alg: 'RS256', now: () => FROZEN, allowOrigins: [ALLOWED, OTHER_ALLOWED] },
  });
}

/** A token signed with the stack's key (or `signWith`) with hand-made header and claims. */
async function craft(
  stack: Stack,
  o: {
    header?: Record<string, unknown>;
    claims?: Record<string, unknown>;
    omit?: string[];
    signWith?: Parameters<SignJWT['sign']>[0];
  } = {},
): Promise<string> {
  const key = stack.key!;
  const claims: Record<string, unknown> = {
    iss: 'tether',
    aud: 'tether-gateway',
    sub: 'mallory',
    jti: randomBytes(8).toString('hex'),
    iat: T,
    exp: T + 600,
    ...o.claims,
  };
  for (const k of o.omit ?? []) delete claims[k];
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, typ: TOKEN_TYP.client, kid: key.kid, ...o.header } as never)
    .sign(o.signWith ?? key.signKey!);
  return track(token);
}

/** Raw WebSocket upgrade: the HTTP status and body the gateway answered (101 when it upgraded). */
function rawUpgrade(wsUrl: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const u = new URL(wsUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: u.hostname,
      port: u.port,
      path,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
        ...headers,
      },
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolve({ status: 101, body: '' });
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Raw gRPC Connect with chosen metadata: 'accepted' (response headers came) or the refusal status. */
function rawGrpc(grpcUrl: string, metadata: Record<string, string>): Promise<'accepted' | { code: number; details: string }> {
  const u = new URL(grpcUrl);
  const client = new Client(`${u.hostname}:${u.port}`, credentials.createInsecure());
  const { connect } = loadGatewayService();
  const md = new Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    const call = client.makeBidiStreamRequest(connect.path, connect.requestSerialize, connect.responseDeserialize, md);
    call.on('error', () => {});
    call.once('metadata', () => {
      resolve('accepted');
      call.cancel();
      client.close();
    });
    call.once('status', (s) => {
      resolve({ code: s.code, details: s.details });
      client.close();
    });
  });
}

/** HTTP POST to the ticket endpoint. */
function postTicket(
  wsUrl: string,
  headers: Record<string, string>,
  method = 'POST',
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const u = new URL(wsUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, path: '/v1/ticket', method, headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** `tether_auth_failures_total{reason}` of one gateway: refusals are counted by the gateway whose door refused. */
async function authFailuresCounted(gateway: Gateway, reason: string): Promise<number> {
  const line = (await gateway.metrics.render()).body
    .split('\n')
    .find((l) => l.startsWith(`tether_auth_failures_total{reason="${reason}"} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Registers a hand-driven agent peer (no engine) with `token`. */
async function rawAgent(
  url: string,
  token: string,
  name: string,
): Promise<{ peer: RpcPeer; closed: Promise<{ code: string; reason: string }> }> {
  const channel = await dial(url, { token });
  const peer = new RpcPeer(channel, { logger });
  const closed = peer.run();
  await peer.request('hello', {
    protocol_version: PROTOCOL_VERSION,
    role: 'agent',
    capabilities: [],
    agent: { name, host: 'test', engines: ['demo'], default_engine: 'demo', labels: {}, sessions: [] },
  });
  return { peer, closed };
}

describe.each(['ws', 'grpc'] as const)('authentication over %s', (transport) => {
  let stack: Stack;
  let cwd: TempDir;
  let url: string;
  /** A session that exists all along: refused connections must leave its history untouched. */
  let witness: { id: string };

  beforeAll(async () => {
    cwd = makeTempDir('tether-auth-');
    stack = await stackFor(transport, cwd.path);
    url = stack.url;
    track(stack.token!);
    const owner = await stack.client();
    witness = (await owner.createSession({ agent: 'test-agent' })).info;
  });
  afterAll(async () => {
    await stack.stop();
    cwd.cleanup();
  });

  /** What must not change when a connection is refused. */
  function state() {
    const dir = stack.gateway.directory;
    return {
      agents: dir.agentList().map((a) => a.name),
      link: dir.agent('test-agent'),
      sessions: dir.sessionList().map((s) => s.id),
      clients: dir.clientCount,
      witnessSeq: dir.get(witness.id)!.info().last_seq,
    };
  }

  /** Expects the door to refuse `token` before the gateway core ever sees the connection. */
  async function refusedAtDoor(token: string | undefined, code: string, message: string): Promise<void> {
    if (token) track(token);
    const before = state();
    const accept = vi.spyOn(stack.gateway, 'accept');
    const err = await rejectionOf(dial(url, { token, connectTimeoutMs: 5_000 }));
    expect(err.code).toBe(code);
    expect(err.message).toContain(message);
    expect(accept).not.toHaveBeenCalled();
    accept.mockRestore();
    expect(state()).toEqual(before);
    expect(state().link).toBe(before.link);
  }

  /** Expects a token to be accepted: the client lists the test agent, then leaves (and the gateway saw it go). */
  async function accepted(token: string): Promise<void> {
    const clients = stack.gateway.directory.clientCount;
    const c = await GatewayClient.connect({ gateway: url, token, reconnect: false, logger });
    try {
      expect((await c.listAgents()).map((a) => a.name)).toEqual(['test-agent']);
    } finally {
      await c.close();
    }
    await waitFor(() => stack.gateway.directory.clientCount === clients, 5_000, 'the gateway to see the client leave');
  }

  const otherRsa = generateTokenKey('RS256').key;

  const DOOR_CASES: [string, (s: Stack) => Promise<string | undefined>, string, string, string][] = [
    ['no token', async () => undefined, 'UNAUTHENTICATED', 'no token', 'missing'],
    ['garbage', async () => 'this-is-not-a-token', 'UNAUTHENTICATED', 'malformed token', 'malformed'],
    ['wrong signature', (s) => craft(s, { signWith: otherRsa.signKey }), 'UNAUTHENTICATED', 'signature invalid', 'bad_signature'],
    [
      'alg none',
      async (s) =>
        `${base64url.encode(JSON.stringify({ alg: 'none', typ: TOKEN_TYP.client, kid: s.key!.kid }))}.${base64url.encode(JSON.stringify({ iss: 'tether', aud: 'tether-gateway', sub: 'm', jti: 'j', iat: T, exp: T + 60 }))}.`,
      'UNAUTHENTICATED',
      'algorithm none is not accepted',
      'bad_alg',
    ],
    [
      'HS256 signed with the RSA public key (algorithm confusion)',
      (s) =>
        craft(s, { header: { alg: 'HS256' }, signWith: Buffer.from(s.key!.verifyKey.export({ type: 'spki', format: 'pem' }) as string) }),
      'UNAUTHENTICATED',
      'algorithm HS256 is not accepted',
      'bad_alg',
    ],
    ['expired 31 s ago', (s) => craft(s, { claims: { exp: T - 31 } }), 'UNAUTHENTICATED', 'token expired', 'expired'],
    ['not valid for another 31 s', (s) => craft(s, { claims: { nbf: T + 31 } }), 'UNAUTHENTICATED', 'not yet valid', 'not_yet_valid'],
    ['missing exp', (s) => craft(s, { omit: ['exp'] }), 'UNAUTHENTICATED', 'no "exp" claim', 'missing_claim'],
    ['wrong issuer', (s) => craft(s, { claims: { iss: 'evil' } }), 'UNAUTHENTICATED', 'wrong issuer', 'wrong_issuer'],
    ['wrong audience', (s) => craft(s, { claims: { aud: 'some-other-api' } }), 'UNAUTHENTICATED', 'wrong audience', 'wrong_audience'],
    [
      'a ticket used as a bearer token',
      (s) => craft(s, { header: { typ: TOKEN_TYP.ticket } }),
      'UNAUTHENTICATED',
      'browser ticket',
      'wrong_type',
    ],
    ['an oversized token', async () => 'a'.repeat(9_000), 'INVALID_ARGUMENT', 'too large', 'too_large'],
  ];

  it.each(DOOR_CASES)('refuses %s at the door, before any gateway state', async (_name, make, code, message, reason) => {
    const counted = await authFailuresCounted(stack.gateway, reason);
    await refusedAtDoor(await make(stack), code, message);
    expect(await authFailuresCounted(stack.gateway, reason)).toBe(counted + 1);
  });

  it('accepts ±29 s of clock skew (exp 29 s ago, nbf in 29 s)', async () => {
    await accepted(await craft(stack, { claims: { exp: T - 29 } }));
    await accepted(await craft(stack, { claims: { nbf: T + 29 } }));
  });

  it('refuses an agent token used by a client, and leaves no client behind', async () => {
    const before = state();
    const counted = await authFailuresCounted(stack.gateway, 'wrong_kind');
    const token = track(await stack.mint({ kind: 'agent', sub: 'test-agent' }));
    const err = await rejectionOf(GatewayClient.connect({ gateway: url, token, reconnect: false, logger }));
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toContain('token is for an agent, not a client');
    expect(state()).toEqual(before);
    expect(await authFailuresCounted(stack.gateway, 'wrong_kind')).toBe(counted + 1);
  });

  /** Expects an agent with `token` registering as `name` to be refused at hello, leaving the live agent as it was. */
  async function agentRefused(name: string, token: string | undefined, code: string, message: string): Promise<void> {
    const before = state();
    const agent = new Agent({ gateway: url, name, engine: 'demo', token, logger });
    const err = await rejectionOf(agent.start());
    await agent.shutdown(0);
    expect(err.code).toBe(code);
    expect(err.message).toContain(message);
    expect(state()).toEqual(before);
    expect(state().link).toBe(before.link);
  }

  it('refuses a client token used by an agent, and registers nothing', async () => {
    await agentRefused('sneaky', stack.token, 'PERMISSION_DENIED', 'token is for a client, not an agent');
  });

  it('refuses an agent token for another agent name', async () => {
    const token = track(await stack.mint({ kind: 'agent', sub: 'box-2', agent: 'other-agent' }));
    await agentRefused('test-agent', token, 'PERMISSION_DENIED', 'may register only as agent "other-agent", not "test-agent"');
  });

  it('refuses a second agent with the same name and another identity; the live one keeps its registration', async () => {
    const token = track(await stack.mint({ kind: 'agent', sub: 'impostor', agent: 'test-agent' }));
    await agentRefused('test-agent', token, 'ALREADY_EXISTS', 'another identity');
    expect(stack.gateway.directory.agent('test-agent')!.principal.sub).toBe('test-agent');
  });

  it('the same identity supersedes its own older link (closed with ABORTED)', async () => {
    const token = track(await stack.mint({ kind: 'agent', sub: 'builder-1', agent: 'builder' }));
    const first = await rawAgent(url, token, 'builder');
    const firstLink = stack.gateway.directory.agent('builder');
    const second = await rawAgent(url, token, 'builder');
    expect(await first.closed).toMatchObject({ code: 'ABORTED', reason: 'superseded by a new connection' });
    expect(stack.gateway.directory.agent('builder')).not.toBe(firstLink);
    const other = track(await stack.mint({ kind: 'agent', sub: 'builder-2', agent: 'builder' }));
    expect((await rejectionOf(rawAgent(url, other, 'builder'))).code).toBe('ALREADY_EXISTS');
    second.peer.channel.close('OK', 'done');
    await second.closed;
  });

  it('a client without control scope can neither prompt nor answer a permission prompt', async () => {
    const owner = await stack.client();
    const session = await owner.createSession({ agent: 'test-agent' });
    const it = session[Symbol.asyncIterator]();
    await session.sendUserMessage('create a file');
    const prompt = (await until(it, isCanUseTool)) as { message: Record<string, unknown> };
    const ask = asPermissionRequest(prompt.message)!;

    const viewer = await stack.client({ sub: 'victor', scopes: ['view'] });
    const watching = await viewer.attach(session.id);
    expect(watching.role).toBe('viewer');
    const seqBefore = stack.gateway.directory.get(session.id)!.info().last_seq;
    expect(await codeOf(watching.sendUserMessage('let me in'))).toBe('PERMISSION_DENIED');
    expect(await codeOf(watching.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }))).toBe('PERMISSION_DENIED');
    expect(await codeOf(watching.send({ type: 'control_request', request_id: 'stop-it', request: { subtype: 'interrupt' } }))).toBe(
      'PERMISSION_DENIED',
    );
    const info = stack.gateway.directory.get(session.id)!.info();
    expect(info.pending_prompts).toBe(1);
    expect(info.last_seq).toBe(seqBefore);

    // create without control: may open a session, not drive it.
    const creator = await stack.client({ sub: 'cora', scopes: ['create'] });
    const own = await creator.createSession({ agent: 'test-agent' });
    expect(await codeOf(own.sendUserMessage('hello'))).toBe('PERMISSION_DENIED');

    await session.answer(ask.requestId, { behavior: 'deny', message: 'not in this test' });
  });

  it('agent scopes hide other agents and their sessions exactly like missing ones; admin sees everything', async () => {
    const narrow = await stack.client({ sub: 'nina', scopes: ['agent:elsewhere'] });
    expect(await narrow.listAgents()).toEqual([]);
    expect((await narrow.listSessions()).map((s) => s.id)).not.toContain(witness.id);
    const hidden = await rejectionOf(narrow.attach(witness.id));
    const missing = await rejectionOf(narrow.attach('no-such-session'));
    expect([hidden.code, missing.code]).toEqual(['NOT_FOUND', 'NOT_FOUND']);
    expect(hidden.message.replace(witness.id, 'ID')).toBe(missing.message.replace('no-such-session', 'ID'));
    expect(await codeOf(narrow.createSession({ agent: 'test-agent' }))).toBe('NOT_FOUND');

    const admin = await stack.client({ sub: 'ada', scopes: ['admin', 'agent:elsewhere'] });
    expect((await admin.listAgents()).map((a) => a.name)).toContain('test-agent');
    expect((await admin.listSessions()).map((s) => s.id)).toContain(witness.id);
    expect((await admin.attach(witness.id)).role).toBe('viewer');
  });

  it('refuses a cross-origin browser connection even with a valid token', async () => {
    const token = stack.token!;
    const accept = vi.spyOn(stack.gateway, 'accept');
    if (transport === 'ws') {
      const r = await rawUpgrade(url, '/v1/connect', { authorization: `Bearer ${token}`, origin: 'https://evil.example' });
      expect(r.status).toBe(403);
      expect(r.body).toContain('origin "https://evil.example" is not allowed');
      const own = await rawUpgrade(url, '/v1/connect', {
        authorization: `Bearer ${token}`,
        origin: `http://127.0.0.1:${stack.server.port}`,
      });
      expect(own.status).toBe(101);
    } else {
      const r = await rawGrpc(url, { authorization: `Bearer ${token}`, origin: 'https://evil.example' });
      expect(r).toMatchObject({ code: 7, details: expect.stringContaining('is not allowed') });
      expect(await rawGrpc(url, { authorization: `Bearer ${token}` })).toBe('accepted');
    }
    expect(accept).toHaveBeenCalledTimes(1); // only the allowed one
    accept.mockRestore();
  });
});

describe('browsers: one-time tickets and Origin', () => {
  let stack: Stack;
  let cwd: TempDir;
  let wsUrl: string;

  beforeAll(async () => {
    cwd = makeTempDir('tether-auth-');
    stack = await stackFor('ws', cwd.path);
    wsUrl = stack.wsUrl;
    track(stack.token!);
  });
  afterAll(async () => {
    await stack.stop();
    cwd.cleanup();
  });

  async function ticket(origin?: string, token = stack.token!): Promise<string> {
    const r = await postTicket(wsUrl, { authorization: `Bearer ${token}`, ...(origin ? { origin } : {}) });
    expect(r.status).toBe(200);
    const body = JSON.parse(r.body) as { ticket: string; expires_in: number };
    expect(body.expires_in).toBeLessThanOrEqual(60);
    expect(r.headers['cache-control']).toBe('no-store');
    return track(body.ticket);
  }

  it("a ticket opens one WebSocket as the token's principal; a reused ticket is refused", async () => {
    const token = track(await stack.mint({ kind: 'client', sub: 'webby' }));
    const t = await ticket(undefined, token);
    const client = await GatewayClient.connect({ gateway: `${wsUrl}/v1/connect?ticket=${t}`, reconnect: false, logger });
    const before = stack.gateway.directory.clientCount;
    const session = await client.createSession({ agent: 'test-agent' });
    expect(session.info.owner).toBe('webby');
    await client.close();
    await waitFor(() => stack.gateway.directory.clientCount === before - 1, 5_000, 'the ticket client to leave');

    const again = await rawUpgrade(wsUrl, `/v1/connect?ticket=${t}`, {});
    expect(again.status).toBe(401);
    expect(again.body).toContain('ticket already used');
    expect(stack.gateway.directory.clientCount).toBe(before - 1);
    expect(lines.some((l) => l.includes('ticket=[redacted]'))).toBe(true);
  });

  it('concurrent redemptions of one ticket: exactly one wins', async () => {
    const t = await ticket(ALLOWED);
    const results = await Promise.all(Array.from({ length: 5 }, () => rawUpgrade(wsUrl, `/v1/connect?ticket=${t}`, { origin: ALLOWED })));
    expect(results.map((r) => r.status).sort()).toEqual([101, 401, 401, 401, 401]);
  });

  it('a ticket is bound to the Origin it was issued to', async () => {
    const t = await ticket(ALLOWED);
    const r = await rawUpgrade(wsUrl, `/v1/connect?ticket=${t}`, { origin: OTHER_ALLOWED });
    expect(r.status).toBe(403);
    expect(r.body).toContain('another origin');
  });

  it('the ticket endpoint checks Origin, token and kind; CORS only for allowed origins', async () => {
    expect((await postTicket(wsUrl, {})).status).toBe(401);
    const evil = await postTicket(wsUrl, { authorization: `Bearer ${stack.token}`, origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    const agentToken = track(await stack.mint({ kind: 'agent', sub: 'test-agent' }));
    const asAgent = await postTicket(wsUrl, { authorization: `Bearer ${agentToken}` });
    expect(asAgent.status).toBe(403);
    expect(JSON.parse(asAgent.body).error.message).toContain('tickets are for clients');
    const preflight = await postTicket(wsUrl, { origin: ALLOWED, 'access-control-request-method': 'POST' }, 'OPTIONS');
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(preflight.headers['access-control-allow-headers']).toBe('authorization');
    expect((await postTicket(wsUrl, { origin: 'https://evil.example' }, 'OPTIONS')).status).toBe(403);
    expect((await postTicket(wsUrl, {}, 'GET')).status).toBe(405);
  });

  it('cookies never authorize, and an oversized Authorization header is refused unread', async () => {
    const cookie = await rawUpgrade(wsUrl, '/v1/connect', { cookie: `token=${stack.token}; session=${stack.token}`, origin: ALLOWED });
    expect(cookie.status).toBe(401);
    expect(cookie.body).toContain('no token');
    const big = await rawUpgrade(wsUrl, '/v1/connect', { authorization: `Bearer ${'a'.repeat(9_000)}` });
    expect(big.status).toBe(400);
    expect(big.body).toContain('Authorization header too large');
  });
});

describe('logs', () => {
  it('no log line written during this suite contains a token or a ticket', () => {
    expect(lines.length).toBeGreaterThan(50);
    expect(lines.some((l) => l.includes('"event":"auth.failed"'))).toBe(true);
    const jwtShaped = /eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/;
    expect(lines.filter((l) => jwtShaped.test(l))).toEqual([]);
    expect(secrets.size).toBeGreaterThan(20);
    for (const s of secrets) {
      const signature = s.split('.')[2] ?? '';
      expect(lines.filter((l) => l.includes(s) || (signature.length > 16 && l.includes(signature)))).toEqual([]);
    }
  });
});
