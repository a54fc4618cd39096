import { createHash } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTokenKey } from '../core/auth/keygen.js';
import { TokenVerifier } from '../core/auth/verify.js';
import { ConfigError, loadConfig } from '../core/config/load.js';
import { GATEWAY_CONFIG } from '../gateway/config.js';
import type { Logger } from '../core/logging.js';
import { BrowserSessions } from '../gateway/door/browser-sessions.js';
import { BROWSER_SIGN_INS_FILE, BrowserSignInFile } from '../gateway/door/browser-sign-in-file.js';
import { CliLoginDesk } from '../gateway/door/cli-login.js';
import { identityFromClaims } from '../gateway/door/oidc-claims.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startStack, type Stack } from './support/stack.js';

/** The parts of the browser sign-in that need no browser: the cookie's life, the claim rules, the terminal's code, the config keys, the door's rules. */
describe('browser sign-ins (the cookie every tab shares)', () => {
  it('end after the idle timeout or the absolute lifetime, by sign-out, and tell who listens', () => {
    let now = 1_000_000;
    const sessions = new BrowserSessions({ idleMs: 1_000, absoluteMs: 5_000, now: () => now });
    const ended: string[] = [];
    sessions.onEnd((_jti, why) => ended.push(why));
    const a = sessions.create({ sub: 'alice', name: 'Alice', scopes: ['view'], via: 'oidc' });
    const s = sessions.use(a);
    expect(s.token.principal).toMatchObject({ sub: 'alice', name: 'Alice', canControl: false, canCreate: false });
    expect(s.token.expiresAt.getTime()).toBe(now + 5_000);
    now += 900;
    sessions.use(a); // used within the idle time: kept, and its idle clock restarts
    now += 999;
    sessions.use(a);
    now += 1_000;
    expect(() => sessions.use(a)).toThrow(
      expect.objectContaining({
        code: 'UNAUTHENTICATED',
        details: { reason: 'signed_out' },
        message: expect.stringContaining('idle too long'),
      }),
    );
    const b = sessions.create({ sub: 'bob', scopes: [], via: 'link' });
    for (let i = 0; i < 6; i++) {
      now += 900;
      if (i < 5) sessions.use(b);
    }
    expect(() => sessions.use(b)).toThrow(expect.objectContaining({ message: expect.stringContaining('lifetime is over') }));
    const c = sessions.create({ sub: 'carol', scopes: [], via: 'link' });
    expect(sessions.end(c)).toBe(true);
    expect(sessions.end(c)).toBe(false);
    expect(() => sessions.use(undefined)).toThrow(expect.objectContaining({ details: { reason: 'no_session' } }));
    expect(() => sessions.use('made-up')).toThrow(expect.objectContaining({ details: { reason: 'signed_out' } }));
    expect(ended).toEqual(['it was idle too long', 'its lifetime is over', 'signed out']);
    expect(sessions.size).toBe(0);
  });

  it('outlive a restart in the state folder (only hashes of cookies written, 0600); ended and expired ones do not come back', () => {
    const dir = makeTempDir('tether-sign-ins-');
    try {
      let now = 1_000_000;
      const first = new BrowserSessions({ idleMs: 10_000, absoluteMs: 50_000, useMirrorMs: 1_000, now: () => now });
      BrowserSignInFile.keep(dir.path, first);
      const alice = first.create({ sub: 'alice', name: 'Alice Adams', scopes: ['control'], via: 'oidc' });
      const bob = first.create({ sub: 'bob', scopes: ['view'], via: 'link' });
      const carol = first.create({ sub: 'carol', scopes: [], via: 'link' });
      first.end(carol);
      const jti = first.use(alice).token.jti;
      const file = join(dir.path, BROWSER_SIGN_INS_FILE);
      const text = readFileSync(file, 'utf8');
      for (const cookie of [alice, bob, carol]) expect(text).not.toContain(cookie);
      expect(text).toContain(createHash('sha256').update(alice).digest('hex'));
      expect(statSync(file).mode & 0o777).toBe(0o600);
      now += 8_000;
      first.use(alice); // mirrored (a use older than useMirrorMs): the idle clock restarts on disk too

      // A new process over the same folder: alice is signed in with the same jti and name; bob's idle time ran out meanwhile.
      now += 5_000;
      const second = new BrowserSessions({ idleMs: 10_000, absoluteMs: 50_000, now: () => now });
      BrowserSignInFile.keep(dir.path, second);
      expect(second.use(alice).token).toMatchObject({ jti, principal: { sub: 'alice', name: 'Alice Adams', canControl: true } });
      expect(() => second.use(bob)).toThrow(expect.objectContaining({ details: { reason: 'signed_out' } }));
      expect(() => second.use(carol)).toThrow(expect.objectContaining({ details: { reason: 'signed_out' } }));
      second.end(alice, 'signed out');
      const third = new BrowserSessions({ now: () => now });
      BrowserSignInFile.keep(dir.path, third);
      expect(third.size).toBe(0);

      // A file that is not ours is set aside: the gateway starts with no sign-ins rather than not at all.
      writeFileSync(file, '{"version":1,"sign_ins":[{"hash":"nope"}]}');
      const warned: string[] = [];
      const fourth = new BrowserSessions({ now: () => now });
      BrowserSignInFile.keep(dir.path, fourth, { warn: (_o: unknown, msg: string) => warned.push(msg) } as unknown as Logger);
      expect(fourth.size).toBe(0);
      expect(warned).toEqual(['the browser sign-ins file is not valid: starting with none']);
    } finally {
      dir.cleanup();
    }
  });

  it('mirror between gateways: a sign-in made on one holds on the other; a sign-out on either ends it on both, connections too', () => {
    const a = new BrowserSessions();
    const b = new BrowserSessions();
    // What the cluster's bucket does, without NATS (the cluster test runs the real one): each tells the other.
    a.mirrorTo({ put: (r) => b.adopt(r), drop: (h) => b.forget(h) });
    b.mirrorTo({ put: (r) => a.adopt(r), drop: (h) => a.forget(h) });
    const endedOnB: string[] = [];
    b.onEnd((_jti, why) => endedOnB.push(why));
    const cookie = a.create({ sub: 'alice', scopes: [], via: 'oidc' });
    expect(b.use(cookie).token.jti).toBe(a.use(cookie).token.jti);
    a.end(cookie);
    expect(endedOnB).toEqual(['signed out']);
    expect(() => b.use(cookie)).toThrow(expect.objectContaining({ details: { reason: 'signed_out' } }));
  });

  it('keep at most maxSessions, ending the least recently used', () => {
    let now = 0;
    const sessions = new BrowserSessions({ maxSessions: 2, now: () => now++ });
    const first = sessions.create({ sub: 'a', scopes: [], via: 'link' });
    const second = sessions.create({ sub: 'b', scopes: [], via: 'link' });
    sessions.use(first);
    sessions.create({ sub: 'c', scopes: [], via: 'link' });
    expect(sessions.size).toBe(2);
    expect(() => sessions.use(second)).toThrow(expect.objectContaining({ code: 'UNAUTHENTICATED' }));
    expect(sessions.use(first).identity.sub).toBe('a');
  });
});

describe('claims to a principal (oidc.scopes)', () => {
  const rules = {
    principalClaim: 'email',
    groupsClaim: 'groups',
    scopes: { builders: ['control', 'create', 'agent:buildbox'], '*': ['view'], 'ops@example.com': ['admin'] },
  };

  it('unites the scopes of every group, the principal itself and "*"; keeps the name', () => {
    expect(identityFromClaims({ sub: 'x1', email: 'ann@example.com', name: ' Ann ', groups: ['builders', 'other'] }, rules)).toEqual({
      sub: 'ann@example.com',
      name: 'Ann',
      scopes: ['view', 'control', 'create', 'agent:buildbox'],
      via: 'oidc',
    });
    expect(identityFromClaims({ email: 'ops@example.com', groups: 'nobody' }, rules).scopes).toEqual(['view', 'admin']);
  });

  it('refuses, in words, a missing principal claim and someone no key lets in', () => {
    expect(() => identityFromClaims({ sub: 'x1' }, rules)).toThrow('your sign-in has no "email"');
    const strict = { ...rules, scopes: { builders: ['control'] } };
    expect(() => identityFromClaims({ email: 'eve@example.com', groups: ['guests'] }, strict)).toThrow(
      expect.objectContaining({
        code: 'PERMISSION_DENIED',
        message:
          "eve@example.com may not use this gateway: none of your groups (guests) is given access in its oidc.scopes. Ask the gateway's administrator to add one.",
      }),
    );
    expect(() => identityFromClaims({ email: 'eve@example.com' }, strict)).toThrow('the identity provider named no groups');
  });
});

describe('tether login codes', () => {
  const key = generateTokenKey('HS256').key;
  const verifier = 'v'.repeat(50);
  const challenge = createHash('sha256').update(verifier).digest('base64url');

  it('trade once, only with the verifier, within a minute, for a client token of the identity', async () => {
    let now = 1_700_000_000_000;
    const desk = new CliLoginDesk(key, () => now);
    const identity = { sub: 'alice', scopes: ['view', 'agent:local'], via: 'oidc' as const };
    const wrong = desk.issue(identity, challenge);
    await expect(desk.redeem(wrong, 'w'.repeat(50))).rejects.toMatchObject({ code: 'UNAUTHENTICATED', details: { reason: 'cli_code' } });
    await expect(desk.redeem(wrong, verifier)).rejects.toThrow('unknown, used or expired'); // a wrong verifier used it up
    const code = desk.issue(identity, challenge);
    const r = await desk.redeem(code, verifier);
    const verified = await new TokenVerifier({ keys: [key], now: () => new Date(now) }).verify(r.token);
    expect(verified.principal).toMatchObject({ sub: 'alice', canControl: false, agents: ['local'] });
    await expect(desk.redeem(code, verifier)).rejects.toThrow('unknown, used or expired');
    const late = desk.issue(identity, challenge);
    now += 60_001;
    await expect(desk.redeem(late, verifier)).rejects.toThrow('unknown, used or expired');
    expect(() => desk.issue(identity, 'short')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('tether login --device', () => {
  it('is pending until a person approves the code, then gives the token once; unknown, used and old codes are refused', async () => {
    let now = 1_700_000_000_000;
    const key = generateTokenKey('HS256').key;
    const desk = new CliLoginDesk(key, () => now);
    const d = desk.startDevice();
    expect(d).toMatchObject({ userCode: expect.stringMatching(/^[B-Z]{4}-[B-Z]{4}$/), expiresIn: 600, interval: 2 });
    expect(await desk.pollDevice(d.deviceCode)).toBe('pending');
    expect(() => desk.approveDevice('ZZZZ-ZZZZ', { sub: 'eve', scopes: [], via: 'link' })).toThrow('no terminal is waiting for this code');
    desk.approveDevice(` ${d.userCode.toLowerCase()} `, { sub: 'alice', scopes: ['view'], via: 'oidc' });
    expect(() => desk.approveDevice(d.userCode, { sub: 'eve', scopes: [], via: 'link' })).toThrow('no terminal is waiting'); // approved once
    const r = await desk.pollDevice(d.deviceCode);
    expect(r).toMatchObject({ sub: 'alice', expiresIn: 7 * 24 * 3600 });
    await expect(desk.pollDevice(d.deviceCode)).rejects.toMatchObject({ code: 'UNAUTHENTICATED', details: { reason: 'cli_code' } });
    const late = desk.startDevice();
    now += 600_001;
    expect(() => desk.approveDevice(late.userCode, { sub: 'alice', scopes: [], via: 'link' })).toThrow('older than 10 minutes');
    await expect(desk.pollDevice(late.deviceCode)).rejects.toThrow('unknown, used or expired');
  });
});

describe('the oidc configuration keys', () => {
  let dir: TempDir;
  beforeAll(() => (dir = makeTempDir('tether-oidc-config-')));
  afterAll(() => dir.cleanup());
  const problemsOf = (flags: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): string[] => {
    try {
      loadConfig(GATEWAY_CONFIG, { flags, env });
    } catch (err) {
      if (err instanceof ConfigError) return err.problems;
      throw err;
    }
    return [];
  };

  it('want issuer and client id together, a mapping, one secret, and known scopes', () => {
    const config = join(dir.path, 'g.json');
    writeFileSync(config, JSON.stringify({ oidc: { issuer: 'https://idp.example.com', clientId: 'tether', scopes: { a: ['fly'] } } }));
    expect(problemsOf({ config })).toEqual([
      'oidc.scopes.a.0 (from ' + config + '): unknown scope "fly" (expected view, create, control, admin or agent:NAME)',
    ]);
    expect(problemsOf({ 'oidc-issuer': 'https://idp.example.com' }, { TETHER_OIDC_SCOPES: 'a=view' })).toEqual([
      'oidc.clientId: sign-in with an identity provider needs both --oidc-issuer and --oidc-client-id',
    ]);
    const secret = join(dir.path, 'secret');
    writeFileSync(secret, 'shh\n');
    expect(
      problemsOf(
        { 'oidc-issuer': 'https://idp.example.com', 'oidc-client-id': 'x', 'oidc-client-secret-file': secret },
        { TETHER_OIDC_CLIENT_SECRET: 'shh' },
      ),
    ).toEqual([
      'oidc.clientSecret (from TETHER_OIDC_CLIENT_SECRET): give --oidc-client-secret-file or TETHER_OIDC_CLIENT_SECRET, not both',
      'oidc.scopes: nobody could use the gateway: map at least one group or claim value to scopes (or "*" for everyone) in the config file',
    ]);
    expect(problemsOf({ 'oidc-issuer': 'http://idp.example.com', 'oidc-client-id': 'x' }, { TETHER_OIDC_SCOPES: 'a=view' })).toEqual([
      'oidc.issuer (from --oidc-issuer): must be an https URL (http only on this machine), got "http://idp.example.com"',
    ]);
    expect(
      problemsOf({ 'oidc-issuer': 'https://idp.example.com', 'oidc-client-id': 'x', auth: 'off' }, { TETHER_OIDC_SCOPES: 'a=view' }),
    ).toEqual(['oidc.issuer (from --oidc-issuer): sign-in with an identity provider needs authentication on (--auth on)']);
    const ok = loadConfig(GATEWAY_CONFIG, {
      flags: { 'oidc-issuer': 'http://127.0.0.1:9', 'oidc-client-id': 'x', 'oidc-principal-claim': 'email' },
      env: { TETHER_OIDC_SCOPES: 'eng=control agent:box,*=view' },
    });
    expect(ok.config.oidc).toMatchObject({
      principalClaim: 'email',
      groupsClaim: 'groups',
      scopes: { eng: ['control', 'agent:box'], '*': ['view'] },
    });
  });
});

describe('the door and the browser sign-in cookie', () => {
  let stack: Stack;
  let base: string;
  let browser: BrowserSessions;
  beforeAll(async () => {
    stack = await startStack({ engine: 'demo' });
    base = stack.server.pageUrl.replace(/\/$/, '');
    browser = stack.server.door.browser!;
  });
  afterAll(() => stack?.stop());

  it('buys a ticket only from an allowed Origin, never without one; sign-out needs the page too', async () => {
    const cookie = browser.create({ sub: 'alice', scopes: [], via: 'link' });
    const headers = { cookie: `__Host-tether_session=${cookie}` };
    const noOrigin = await fetch(`${base}/v1/ticket`, { method: 'POST', headers });
    expect(noOrigin.status).toBe(403);
    const foreign = await fetch(`${base}/v1/ticket`, { method: 'POST', headers: { ...headers, origin: 'https://evil.example' } });
    expect(foreign.status).toBe(403);
    const ok = await fetch(`${base}/v1/ticket`, { method: 'POST', headers: { ...headers, origin: base } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-credentials')).toBeNull();
    const none = await fetch(`${base}/v1/ticket`, { method: 'POST', headers: { origin: base } });
    expect(await none.json()).toEqual({
      error: {
        code: 'UNAUTHENTICATED',
        message: "not signed in (send a client token as Authorization: Bearer, or sign in on the gateway's page)",
        reason: 'no_session',
      },
    });
    expect((await fetch(`${base}/v1/logout`, { method: 'POST', headers })).status).toBe(403);
    const out = await fetch(`${base}/v1/logout`, { method: 'POST', headers: { ...headers, origin: base } });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toBe('__Host-tether_session=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict');
    expect((await fetch(`${base}/v1/ticket`, { method: 'POST', headers: { ...headers, origin: base } })).status).toBe(401);
  });

  it('a sign-in link sets the cookie on loopback and says so; without an identity provider the page offers links only', async () => {
    expect(await (await fetch(`${base}/v1/login`)).json()).toEqual({ auth: 'on' });
    const { mintLoginCode } = await import('../core/auth/login-codes.js');
    const res = await fetch(`${base}/v1/login`, {
      method: 'POST',
      headers: { origin: base },
      body: JSON.stringify({ code: await mintLoginCode(stack.key!, { sub: 'dave', scopes: ['view'] }) }),
    });
    expect(((await res.json()) as { browser_session: boolean }).browser_session).toBe(true);
    expect(res.headers.get('set-cookie')).toMatch(
      /^__Host-tether_session=[\w-]{43}; Path=\/; Max-Age=604800; HttpOnly; Secure; SameSite=Strict$/,
    );
    const start = await fetch(`${base}/v1/oidc/start`, { redirect: 'manual' });
    expect(start.status).toBe(400);
    expect(await start.text()).toContain('sign-in with an identity provider is not set up on this gateway');
  });
});
