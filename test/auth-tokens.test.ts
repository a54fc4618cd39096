import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, base64url } from 'jose';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { bearerToken } from '../core/auth/bearer.js';
import { parseTtl } from '../core/auth/duration.js';
import { remoteKeySet } from '../core/auth/jwks.js';
import { generateTokenKey, writeKeyFile } from '../core/auth/keygen.js';
import { loadKeyFile, parseKey, TOKEN_ALGS, type TokenKey } from '../core/auth/keys.js';
import { mintToken } from '../core/auth/mint.js';
import { principalFromScopes } from '../core/auth/scopes.js';
import { ensureStateKey } from '../core/auth/state-dir.js';
import { TicketBook } from '../core/auth/tickets.js';
import { TOKEN_TYP } from '../core/auth/token-kinds.js';
import { TokenVerifier } from '../core/auth/verify.js';
import { rejectionOf } from './support/items.js';

/**
 * The JWT matrix, in process (threats.md 2A: A2-A5, A7, A10): every token kind and algorithm,
 * every way a token can be wrong, keys on disk, the JWKS limits, and one-time tickets.
 */

const NOW = new Date('2026-06-01T12:00:00Z');
const T = Math.floor(NOW.getTime() / 1000);
const clock = () => NOW;

const keys = Object.fromEntries(TOKEN_ALGS.map((alg) => [alg, generateTokenKey(alg).key])) as Record<(typeof TOKEN_ALGS)[number], TokenKey>;
const hs = keys.HS256;
const rs = keys.RS256;

/** A token with a hand-made header and claims (defaults: a valid client token for `key`). */
async function craft(
  key: TokenKey,
  o: {
    header?: Record<string, unknown>;
    claims?: Record<string, unknown>;
    omit?: string[];
    signWith?: Parameters<SignJWT['sign']>[0];
  } = {},
): Promise<string> {
  const claims: Record<string, unknown> = {
    iss: 'tether',
    aud: 'tether-gateway',
    sub: 'alice',
    jti: 'j-1',
    iat: T,
    exp: T + 600,
    ...o.claims,
  };
  for (const k of o.omit ?? []) delete claims[k];
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, typ: TOKEN_TYP.client, kid: key.kid, ...o.header } as never)
    .sign(o.signWith ?? key.signKey!);
}

/** An unsigned token (alg none), built by hand because jose refuses to make one for jwtVerify. */
function unsigned(header: Record<string, unknown>, claims: Record<string, unknown>): string {
  return `${base64url.encode(JSON.stringify(header))}.${base64url.encode(JSON.stringify(claims))}.`;
}

async function refusal(p: Promise<unknown>): Promise<{ code: string; message: string; reason: unknown }> {
  const e = await rejectionOf(p);
  return { code: e.code, message: e.message, reason: e.details?.reason };
}

describe('minting and verifying', () => {
  it.each(TOKEN_ALGS)('%s: agent and client tokens verify to the right principal', async (alg) => {
    const v = new TokenVerifier({ keys: [keys[alg]], now: clock });
    const agent = await v.verify(
      await mintToken({ key: keys[alg], kind: 'agent', sub: 'bb-1', agent: 'buildbox', ttlSeconds: 60, now: NOW }),
    );
    expect(agent).toMatchObject({
      kind: 'agent',
      principal: { sub: 'bb-1', kind: 'agent', agentName: 'buildbox', canCreate: false, canControl: false },
    });
    const client = await v.verify(
      await mintToken({ key: keys[alg], kind: 'client', sub: 'alice', scopes: ['view', 'agent:buildbox'], ttlSeconds: 60, now: NOW }),
    );
    expect(client.principal).toEqual({
      sub: 'alice',
      kind: 'client',
      canCreate: false,
      canControl: false,
      canAdmin: false,
      agents: ['buildbox'],
    });
    expect(client.expiresAt.getTime()).toBe((T + 60) * 1000);
  });

  it('scopes: none = create + control everywhere; actions and agents narrow independently', () => {
    const p = (s: string[]) => principalFromScopes('u', s);
    expect(p([])).toMatchObject({ canCreate: true, canControl: true, canAdmin: false, agents: undefined });
    expect(p(['agent:a', 'agent:b'])).toMatchObject({ canCreate: true, canControl: true, agents: ['a', 'b'] });
    expect(p(['view'])).toMatchObject({ canCreate: false, canControl: false, canAdmin: false, agents: undefined });
    expect(p(['control', 'agent:a'])).toMatchObject({ canCreate: false, canControl: true, agents: ['a'] });
    expect(p(['admin'])).toMatchObject({ canCreate: false, canControl: false, canAdmin: true });
    expect(p(['agent:*', 'agent:a'])).toMatchObject({ agents: undefined });
    expect(() => p(['root'])).toThrow(/unknown scope "root"/);
    expect(() => p(['agent:../x'])).toThrow(/unknown scope/);
  });

  it('a client token may carry a display name; the principal shows it and a bad one is left out, never trusted as the subject', async () => {
    const v = new TokenVerifier({ keys: [hs], now: clock });
    const named = await v.verify(await mintToken({ key: hs, kind: 'client', sub: 'bob', name: 'Bob Brown', ttlSeconds: 60, now: NOW }));
    expect(named.principal).toMatchObject({ sub: 'bob', name: 'Bob Brown' });
    const badName = async (name: unknown) =>
      (await v.verify(await mintToken({ key: hs, kind: 'client', sub: 'bob', ttlSeconds: 60, now: NOW, claims: { name } }))).principal;
    for (const name of ['', 'x'.repeat(129), 'Bob\nBrown', 42]) expect(await badName(name)).not.toHaveProperty('name');
    expect((await refusal(mintToken({ key: hs, kind: 'agent', sub: 'a', name: 'A', ttlSeconds: 60 }))).message).toContain(
      'a display name is for client tokens',
    );
  });

  it('minting refuses what would make a bad token', async () => {
    expect((await refusal(mintToken({ key: hs, kind: 'client', sub: 'a', scopes: ['sudo'], ttlSeconds: 60 }))).code).toBe(
      'INVALID_ARGUMENT',
    );
    expect((await refusal(mintToken({ key: hs, kind: 'agent', sub: 'a', scopes: ['view'], ttlSeconds: 60 }))).message).toContain(
      'scopes are for client tokens',
    );
    expect((await refusal(mintToken({ key: hs, kind: 'client', sub: 'a', agent: 'x', ttlSeconds: 60 }))).message).toContain(
      'only agent tokens name an agent',
    );
    expect((await refusal(mintToken({ key: hs, kind: 'agent', sub: 'bad name', ttlSeconds: 60 }))).message).toContain('agent name');
    const publicOnly = parseKey(JSON.stringify(generateTokenKey('EdDSA').publicJwk));
    expect((await refusal(mintToken({ key: publicOnly, kind: 'client', sub: 'a', ttlSeconds: 60 }))).message).toContain('can only verify');
  });
});

describe('refused tokens (each says what was wrong, never echoing the token)', () => {
  const v = new TokenVerifier({ keys: [rs], now: clock });
  const other = generateTokenKey('RS256').key;
  const hsV = new TokenVerifier({ keys: [hs], now: clock });

  const cases: [string, () => Promise<string>, string, string][] = [
    ['garbage', async () => 'not a token at all', 'malformed', 'malformed token'],
    ['three junk segments', async () => 'abc.def.ghi', 'malformed', 'malformed token'],
    ['too large', async () => 'a'.repeat(9000), 'too_large', 'too large'],
    ['wrong signature (same kid, another key)', () => craft(rs, { signWith: other.signKey }), 'bad_signature', 'signature invalid'],
    ['unknown kid', () => craft(other), 'unknown_key', 'unknown kid'],
    [
      'alg none',
      async () =>
        unsigned(
          { alg: 'none', typ: TOKEN_TYP.client, kid: rs.kid },
          { iss: 'tether', aud: 'tether-gateway', sub: 'a', jti: 'j', iat: T, exp: T + 60 },
        ),
      'bad_alg',
      'algorithm none is not accepted',
    ],
    [
      'HS256 signed with the RSA public key (algorithm confusion)',
      () => craft(rs, { header: { alg: 'HS256' }, signWith: Buffer.from(rs.verifyKey.export({ type: 'spki', format: 'pem' }) as string) }),
      'bad_alg',
      'algorithm HS256 is not accepted',
    ],
    [
      'ES256 token naming the RS256 key',
      () => craft(keys.ES256, { header: { kid: rs.kid } }),
      'bad_alg',
      'algorithm ES256 is not accepted',
    ],
    [
      'attacker key embedded in the header (jwk)',
      () => craft(other, { header: { kid: rs.kid, jwk: other.verifyKey.export({ format: 'jwk' }) } }),
      'bad_signature',
      'signature invalid',
    ],
    [
      'attacker key URL in the header (jku)',
      () => craft(other, { header: { kid: rs.kid, jku: 'https://evil.example/jwks' } }),
      'bad_signature',
      'signature invalid',
    ],
    ['expired 31 s ago', () => craft(rs, { claims: { exp: T - 31 } }), 'expired', 'token expired'],
    ['not valid for another 31 s', () => craft(rs, { claims: { nbf: T + 31 } }), 'not_yet_valid', 'not yet valid'],
    ['issued 31 s in the future', () => craft(rs, { claims: { iat: T + 31 } }), 'not_yet_valid', 'issued in the future'],
    ['missing exp', () => craft(rs, { omit: ['exp'] }), 'missing_claim', 'no "exp" claim'],
    ['missing iat', () => craft(rs, { omit: ['iat'] }), 'missing_claim', 'no "iat" claim'],
    ['missing jti', () => craft(rs, { omit: ['jti'] }), 'missing_claim', 'no "jti" claim'],
    ['missing sub', () => craft(rs, { omit: ['sub'] }), 'missing_claim', 'no "sub" claim'],
    ['wrong issuer', () => craft(rs, { claims: { iss: 'someone-else' } }), 'wrong_issuer', 'wrong issuer'],
    ['wrong audience', () => craft(rs, { claims: { aud: 'another-service' } }), 'wrong_audience', 'wrong audience'],
    ['no typ', () => craft(rs, { header: { typ: undefined } }), 'wrong_type', 'wrong token type'],
    ['plain JWT typ', () => craft(rs, { header: { typ: 'JWT' } }), 'wrong_type', 'wrong token type'],
    ['a ticket presented as a bearer token', () => craft(rs, { header: { typ: TOKEN_TYP.ticket } }), 'wrong_type', 'browser ticket'],
    ['agent token naming no agent', () => craft(rs, { header: { typ: TOKEN_TYP.agent } }), 'bad_claim', 'names no valid agent'],
    ['unknown scope', () => craft(rs, { claims: { scope: 'view sudo' } }), 'bad_scope', 'unknown scope'],
  ];

  it.each(cases)('%s', async (_name, make, reason, message) => {
    const token = await make();
    const r = await refusal(v.verify(token));
    expect(r).toMatchObject({ code: 'UNAUTHENTICATED', reason });
    expect(r.message).toContain(message);
    expect(r.message).not.toContain(token.slice(0, 20));
  });

  it('accepts ±29 s of clock skew on exp, nbf and iat', async () => {
    await expect(v.verify(await craft(rs, { claims: { exp: T - 29 } }))).resolves.toMatchObject({ kind: 'client' });
    await expect(v.verify(await craft(rs, { claims: { nbf: T + 29 } }))).resolves.toMatchObject({ kind: 'client' });
    await expect(v.verify(await craft(rs, { claims: { iat: T + 29 } }))).resolves.toMatchObject({ kind: 'client' });
  });

  it('HS256: wrong secret, and a public-key verifier never accepts HS256', async () => {
    expect((await refusal(hsV.verify(await craft(hs, { signWith: generateTokenKey('HS256').key.signKey })))).reason).toBe('bad_signature');
    const asSecret = Buffer.from(rs.verifyKey.export({ type: 'spki', format: 'pem' }) as string);
    expect((await refusal(v.verify(await craft(rs, { header: { alg: 'HS256', kid: undefined }, signWith: asSecret })))).reason).toBe(
      'bad_alg',
    );
  });

  it('kid injection: any kid string is only a lookup in our own map (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 300 }),
          fc.constantFrom('../../etc/passwd', "' OR 1=1 --", 'x'.repeat(5000), '__proto__', 'constructor'),
        ),
        async (kid) => {
          fc.pre(kid !== rs.kid);
          const token = await craft(rs, { header: { kid } });
          const r = await refusal(v.verify(token));
          expect(r.code).toBe('UNAUTHENTICATED');
          expect(['unknown_key', 'too_large']).toContain(r.reason);
        },
      ),
      { numRuns: 200, seed: 42 },
    );
  });
});

describe('token kinds are separate (A4: {client, agent, ticket} × {bearer, ticket})', () => {
  it('bearer verification takes agent and client tokens only; ticket redemption takes tickets only', async () => {
    const v = new TokenVerifier({ keys: [hs], now: clock });
    const book = new TicketBook();
    const client = await mintToken({ key: hs, kind: 'client', sub: 'alice', ttlSeconds: 60, now: NOW });
    const agent = await mintToken({ key: hs, kind: 'agent', sub: 'bb', ttlSeconds: 60, now: NOW });
    const { ticket } = await book.issue(principalFromScopes('alice', []), undefined);
    expect((await v.verify(client)).kind).toBe('client');
    expect((await v.verify(agent)).kind).toBe('agent');
    expect((await refusal(v.verify(ticket))).reason).toBe('unknown_key');
    expect((await refusal(book.redeem(client, undefined))).reason).toBe('wrong_type');
    expect((await refusal(book.redeem(agent, undefined))).reason).toBe('wrong_type');
    await expect(book.redeem(ticket, undefined)).resolves.toMatchObject({ sub: 'alice', kind: 'client' });
  });
});

describe('tickets (A10)', () => {
  const alice = principalFromScopes('alice', ['view']);

  it('single use, even when redeemed concurrently; bound to its origin; expire after ≤ 60 s', async () => {
    let now = Date.now();
    const book = new TicketBook({ ttlSeconds: 600, now: () => new Date(now) });
    const { ticket, expiresIn } = await book.issue(alice, 'https://app.example');
    expect(expiresIn).toBe(60);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => book.redeem(ticket, 'https://app.example')));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((await refusal(book.redeem(ticket, 'https://app.example'))).reason).toBe('ticket_used');

    const second = await book.issue(alice, 'https://app.example');
    expect(await refusal(book.redeem(second.ticket, 'https://evil.example'))).toMatchObject({
      code: 'PERMISSION_DENIED',
      reason: 'ticket_origin',
    });
    expect((await refusal(book.redeem(second.ticket, 'https://app.example'))).reason).toBe('ticket_used');

    const third = await book.issue(alice, undefined);
    now += 61_000;
    expect((await refusal(book.redeem(third.ticket, undefined))).reason).toBe('expired');
  });

  it('only clients get tickets, and the book is bounded', async () => {
    const book = new TicketBook({ maxOutstanding: 2 });
    expect(
      (
        await refusal(
          book.issue({ sub: 'bb', kind: 'agent', agentName: 'bb', canCreate: false, canControl: false, canAdmin: false }, undefined),
        )
      ).code,
    ).toBe('PERMISSION_DENIED');
    await book.issue(alice, undefined);
    await book.issue(alice, undefined);
    expect((await refusal(book.issue(alice, undefined))).code).toBe('RESOURCE_EXHAUSTED');
  });
});

describe('keys on disk', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tether-keys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(TOKEN_ALGS)('%s: written 0600, read back with the same kid; PEM gives the same kid', async (alg) => {
    const g = generateTokenKey(alg);
    const path = join(dir, `${alg}.json`);
    writeKeyFile(path, g.privateJwk);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(() => writeKeyFile(path, g.privateJwk)).toThrow(/already exists/);
    const loaded = loadKeyFile(path);
    expect(loaded).toMatchObject({ kid: g.key.kid, alg });
    const token = await mintToken({ key: loaded, kind: 'client', sub: 'a', ttlSeconds: 60 });
    await expect(new TokenVerifier({ keys: [g.key] }).verify(token)).resolves.toMatchObject({ kind: 'client' });
    if (alg !== 'HS256') {
      const pemPath = join(dir, `${alg}.pem`);
      writeFileSync(pemPath, g.key.signKey!.export({ type: 'pkcs8', format: 'pem' }) as string);
      expect(loadKeyFile(pemPath)).toMatchObject({ kid: g.key.kid, alg });
      const pub = parseKey(g.key.verifyKey.export({ type: 'spki', format: 'pem' }) as string);
      expect(pub.signKey).toBeUndefined();
      await expect(new TokenVerifier({ keys: [pub] }).verify(token)).resolves.toMatchObject({ kind: 'client' });
    }
  });

  it('refuses what is not a usable key, saying why', () => {
    expect(() => parseKey('hello')).toThrow(/not a key/);
    expect(() => parseKey(JSON.stringify({ kty: 'oct', k: 'c2hvcnQ' }))).toThrow(/at least 32 bytes/);
    expect(() => parseKey(JSON.stringify({ kty: 'oct', k: 'x'.repeat(64), alg: 'HS512' }))).toThrow(/must be HS256/);
    expect(() => parseKey(JSON.stringify({ keys: [] }))).toThrow(/--jwks-url/);
  });

  it('the state folder gets an HS256 key on first run, and keeps it', () => {
    const state = join(dir, 'state');
    const first = ensureStateKey(state);
    expect(first).toMatchObject({ created: true, key: { alg: 'HS256' } });
    expect(statSync(first.path).mode & 0o777).toBe(0o600);
    expect(statSync(state).mode & 0o777).toBe(0o700);
    expect(ensureStateKey(state)).toMatchObject({ created: false, key: { kid: first.key.kid } });
  });

  it('ttl and Authorization parsing', () => {
    expect([parseTtl('90s'), parseTtl('15m'), parseTtl('1h'), parseTtl('2d'), parseTtl('30')]).toEqual([90, 900, 3600, 172_800, 30]);
    for (const bad of ['', '1w', '-1h', '0', '1.5h', '400d']) expect(() => parseTtl(bad)).toThrow(/--ttl/);
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer   abc')).toBe('abc');
    expect(() => bearerToken(undefined)).toThrow(/no token/);
    expect(() => bearerToken('Basic dXNlcjpwYXNz')).toThrow(/not "Bearer <token>"/);
    expect(() => bearerToken('Bearer ' + 'a'.repeat(9000))).toThrow(/too large/);
  });
});

describe('remote key set (A7)', () => {
  const signer = generateTokenKey('EdDSA');
  let mode: 'ok' | 'huge' | 'hang' | 'error' = 'ok';
  let server: Server;
  let url = '';
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  async function start(): Promise<void> {
    server = createServer((_req, res) => {
      if (mode === 'hang') return; // never answers
      if (mode === 'error') return void res.writeHead(500).end('boom');
      if (mode === 'huge') {
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = 'x'.repeat(64 * 1024);
        let sent = 0;
        const pump = () => {
          while (sent < 20 * 1024 * 1024 && res.write(chunk)) sent += chunk.length;
          if (sent < 20 * 1024 * 1024) res.once('drain', pump);
          else res.end();
        };
        res.on('error', () => {});
        return pump();
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [signer.publicJwk] }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`;
  }

  it('verifies with fetched keys, keeps cached keys while the endpoint fails, and refuses unknown keys', async () => {
    await start();
    mode = 'ok';
    const v = new TokenVerifier({ jwks: remoteKeySet(url), now: clock });
    const token = await mintToken({ key: signer.key, kind: 'client', sub: 'a', ttlSeconds: 60, now: NOW });
    await expect(v.verify(token)).resolves.toMatchObject({ kind: 'client' });
    mode = 'error';
    await expect(v.verify(token)).resolves.toMatchObject({ kind: 'client' }); // cached (10 min)
    const stranger = await mintToken({ key: generateTokenKey('EdDSA').key, kind: 'client', sub: 'a', ttlSeconds: 60, now: NOW });
    expect(await refusal(v.verify(stranger))).toMatchObject({ code: 'UNAUTHENTICATED', reason: 'unknown_key' }); // in cooldown: no refetch
    expect((await refusal(v.verify(await craft(hs)))).reason).toBe('bad_alg'); // never HS256 from a JWKS
  });

  it('a failing, hanging or huge endpoint is UNAVAILABLE with a reason, quickly', async () => {
    const token = await mintToken({ key: signer.key, kind: 'client', sub: 'a', ttlSeconds: 60, now: NOW });
    mode = 'error';
    expect((await refusal(new TokenVerifier({ jwks: remoteKeySet(url), now: clock }).verify(token))).code).toBe('UNAVAILABLE');
    mode = 'hang';
    const started = Date.now();
    const hung = await refusal(new TokenVerifier({ jwks: remoteKeySet(url, { timeoutMs: 300 }), now: clock }).verify(token));
    expect(hung).toMatchObject({ code: 'UNAVAILABLE', reason: 'keys_unavailable' });
    expect(Date.now() - started).toBeLessThan(3_000);
    mode = 'huge';
    const huge = await refusal(new TokenVerifier({ jwks: remoteKeySet(url), now: clock }).verify(token));
    expect(huge).toMatchObject({ code: 'UNAVAILABLE', reason: 'keys_unavailable' });
    expect(huge.message).toContain('larger than 65536 bytes');
  });
});
