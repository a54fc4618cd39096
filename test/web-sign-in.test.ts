import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lineDiff, viewTool } from '../client/tool-view.js';
import { generateTokenKey } from '../core/auth/keygen.js';
import { LoginDesk, mintLoginCode } from '../core/auth/login-codes.js';
import { mintToken } from '../core/auth/mint.js';
import { TokenVerifier } from '../core/auth/verify.js';
import { DEFAULT_WEB_ROOT } from '../gateway/listen/listen-http-web.js';
import { startStack, type Stack } from './support/stack.js';

/** Sign-in codes, the HTTP endpoints the page uses, the page's budget, and the shared tool view. */
describe('web sign-in codes', () => {
  const key = generateTokenKey('HS256').key;

  it('trade once for a client token with the code’s subject and scopes', async () => {
    const desk = new LoginDesk(key);
    const code = await mintLoginCode(key, { sub: 'alice', scopes: ['view'] });
    const { token, sub, expiresIn } = await desk.redeem(code);
    expect(sub).toBe('alice');
    expect(expiresIn).toBe(12 * 3600);
    const verified = await new TokenVerifier({ keys: [key] }).verify(token);
    expect(verified.kind).toBe('client');
    expect(verified.principal).toMatchObject({ sub: 'alice', canControl: false, canCreate: false });
    await expect(desk.redeem(code)).rejects.toMatchObject({ code: 'UNAUTHENTICATED', details: { reason: 'login_used' } });
  });

  it('refuse an expired code, a code from another key, a bearer token, and never pass as a bearer token', async () => {
    let now = new Date('2026-01-01T00:00:00Z');
    const desk = new LoginDesk(key, { now: () => now });
    const code = await mintLoginCode(key, { sub: 'alice' }, 300, now);
    now = new Date(now.getTime() + 301_000);
    await expect(desk.redeem(code)).rejects.toMatchObject({ code: 'UNAUTHENTICATED', details: { reason: 'expired' } });
    const other = await mintLoginCode(generateTokenKey('HS256').key, { sub: 'mallory' });
    await expect(new LoginDesk(key).redeem(other)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    const bearer = await mintToken({ key, kind: 'client', sub: 'alice', ttlSeconds: 60 });
    await expect(new LoginDesk(key).redeem(bearer)).rejects.toMatchObject({ details: { reason: 'wrong_type' } });
    await expect(new TokenVerifier({ keys: [key] }).verify(await mintLoginCode(key, { sub: 'alice' }))).rejects.toMatchObject({
      details: { reason: 'wrong_type' },
    });
    await expect(mintLoginCode(key, { sub: 'alice' }, 3600)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('the gateway serves the page and its sign-in endpoint', () => {
  let stack: Stack;
  let base: string;
  beforeAll(async () => {
    stack = await startStack({ engine: 'demo' });
    base = stack.server.pageUrl.replace(/\/$/, '');
  });
  afterAll(() => stack?.stop());

  it('serves / with a strict content security policy, and assets; the WebSocket path stays the WebSocket', async () => {
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(await page.text()).toContain('<script type="module" src="/app.js">');
    const app = await fetch(`${base}/app.js`);
    expect(app.headers.get('content-type')).toContain('text/javascript');
    expect((await fetch(`${base}/nope.js`)).status).toBe(404);
    expect((await fetch(`${base}/../package.json`)).status).toBe(404);
    expect((await fetch(`${base}/v1/connect`)).status).toBe(404);
    expect((await fetch(`${base}/`, { method: 'POST' })).status).toBe(405);
  });

  it('POST /v1/login: once per code, same origin only, typed errors for bad bodies', async () => {
    expect(await (await fetch(`${base}/v1/login`)).json()).toEqual({ auth: 'on' });
    const code = await mintLoginCode(stack.key!, { sub: 'alice' });
    const foreign = await fetch(`${base}/v1/login`, {
      method: 'POST',
      headers: { origin: 'https://evil.example' },
      body: JSON.stringify({ code }),
    });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
    const ok = await fetch(`${base}/v1/login`, { method: 'POST', headers: { origin: base }, body: JSON.stringify({ code }) });
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as { token: string; principal: string };
    expect(body.principal).toBe('alice');
    const again = await fetch(`${base}/v1/login`, { method: 'POST', headers: { origin: base }, body: JSON.stringify({ code }) });
    expect(again.status).toBe(401);
    expect(((await again.json()) as { error: { message: string } }).error.message).toContain('already used');
    // The token it gave opens a WebSocket through a ticket, as the page does.
    const ticket = await fetch(`${base}/v1/ticket`, { method: 'POST', headers: { authorization: `Bearer ${body.token}`, origin: base } });
    expect(ticket.status).toBe(200);
    const bad = await fetch(`${base}/v1/login`, { method: 'POST', body: 'not json' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('INVALID_ARGUMENT');
    const huge = await fetch(`${base}/v1/login`, { method: 'POST', body: JSON.stringify({ code: 'x'.repeat(20_000) }) }).catch(
      () => undefined,
    );
    expect(huge === undefined || huge.status === 400).toBe(true);
  });

  it('keeps the whole page within its budget: 250 KB gzipped', () => {
    const gz = ['index.html', 'app.js', 'styles.css'].reduce((n, f) => n + gzipSync(readFileSync(`${DEFAULT_WEB_ROOT}${f}`)).length, 0);
    expect(gz).toBeLessThan(250 * 1024);
  });
});

describe('tool view (shared by the web page and the terminal)', () => {
  it('reads tools the way people do', () => {
    expect(viewTool('Bash', { command: 'ls -la', description: 'list' }).summary).toBe('ls -la');
    expect(viewTool('Read', { file_path: '/src/app.ts' }).summary).toBe('/src/app.ts');
    expect(viewTool('AskUserQuestion', { questions: [{ question: 'Which one?' }] }).summary).toBe('Which one?');
    expect(viewTool('Edit', { file_path: 'a.txt', old_string: 'a\nb\nc', new_string: 'a\nB\nc' }).diff).toEqual([
      { op: ' ', text: 'a' },
      { op: '-', text: 'b' },
      { op: '+', text: 'B' },
      { op: ' ', text: 'c' },
    ]);
    expect(viewTool('Write', { file_path: 'n.txt', content: 'x\ny' }).diff).toEqual([
      { op: '+', text: 'x' },
      { op: '+', text: 'y' },
    ]);
    expect(viewTool('Custom', { a: 1 }).summary).toBe('{"a":1}');
    const big = Array.from({ length: 500 }, (_, i) => `l${i}`).join('\n');
    expect(lineDiff(big, big + '\nmore')).toHaveLength(1001); // beyond the cap: all removed, all added, still bounded
  });
});
