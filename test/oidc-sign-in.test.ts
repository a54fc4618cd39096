import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, person, startSession } from './support/browser.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { runTether, startTether, type Daemon } from './support/cli.js';
import { signInAtIdp, startTestIdp, type TestIdp } from './support/oidc-provider.js';
import { hasTool } from './support/tools.js';
import { waitFor } from './support/wait.js';
import { GatewayClient } from '../client/gateway-client.js';
import { mintToken } from '../core/auth/mint.js';
import { loadKeyFile } from '../core/auth/keys.js';
import { stateKeyPath } from '../core/auth/state-dir.js';

/**
 * Sign-in with a real OpenID provider (oidc-provider on loopback) through Chromium, against
 * `tether up` with the demo engine: groups mapped to scopes, one sign-in for every tab, sign
 * out everywhere, revocation, forged and replayed callbacks, and `tether login`.
 */
describe.skipIf(!hasTool('chromium'))('web sign-in with an identity provider (oidc-provider, Chromium, tether up)', () => {
  let idp: TestIdp;
  let up: Daemon;
  let browser: Browser;
  let state: TempDir;
  let home: TempDir;
  let cwd: TempDir;
  let origin: string;
  let wsUrl: string;
  /** The children's environment: no token or gateway of the caller's, a home of their own. */
  const env = () => ({ HOME: home.path, TETHER_TOKEN: '', TETHER_GATEWAY: '', TETHER_STATE_DIR: '' });

  beforeAll(async () => {
    idp = await startTestIdp({
      alice: { name: 'Alice Adams', email: 'alice@example.com', groups: ['builders'] },
      bob: { name: 'Bob Brown', email: 'bob@example.com', groups: ['watchers'] },
      carol: { name: 'Carol Cole', email: 'carol@example.com', groups: ['visitors'] },
    });
    state = makeTempDir('tether-oidc-state-');
    home = makeTempDir('tether-oidc-home-');
    cwd = makeTempDir('tether-oidc-cwd-');
    const config = join(state.path, 'gateway.json');
    writeFileSync(
      config,
      JSON.stringify({
        oidc: {
          issuer: idp.issuer,
          clientId: idp.clientId,
          name: 'Test IdP',
          scopes: { builders: ['control', 'create', 'agent:local'], watchers: ['view', 'agent:local'] },
        },
      }),
    );
    up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', cwd.path, '--state-dir', state.path, '--config', config], {
      env: { ...env(), TETHER_OIDC_CLIENT_SECRET: idp.clientSecret },
    });
    wsUrl = (await up.line('gateway: ')).slice('gateway: '.length);
    origin = wsUrl.replace(/^ws:/, 'http:');
    idp.register(`${origin}/v1/oidc/callback`);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await up?.stop('SIGTERM');
    await idp?.close();
    for (const d of [state, home, cwd]) d?.cleanup();
  });

  /** Opens the page, signs in with the provider as `login`; resolves on the page it came back to. */
  async function signInAs(page: Page, login: string): Promise<void> {
    await page.goto(`${origin}/`);
    await page.getByRole('button', { name: 'Sign in with Test IdP' }).click();
    await page.waitForURL((u) => u.origin === idp.issuer);
    await signInAtIdp(page, login, origin);
  }

  it('signs people in through the provider; their groups give alice control and bob view on agent local; names shown', async () => {
    const alice = await person(browser);
    await signInAs(alice.page, 'alice');
    await alice.page.getByRole('button', { name: 'Start session' }).waitFor();
    expect(await alice.page.getByTestId('principal').textContent()).toBe('Alice Adams');
    const id = await startSession(alice.page); // control + create on local: she runs a session
    const bob = await person(browser);
    await signInAs(bob.page, 'bob');
    await bob.page.getByTestId('cannot-start').waitFor(); // view only: the page says so and offers no start
    expect(await bob.page.getByTestId('principal').textContent()).toBe('Bob Brown');
    // Members are shown by their names too (the subject stays in the title and the audit).
    await bob.page.goto(`${origin}/#session=${id}`);
    await bob.page.reload(); // a session link opened in a fresh load, as from chat
    await bob.page.locator('[data-testid=transcript]').waitFor();
    await alice.page.getByTestId('member-name').filter({ hasText: 'Bob Brown' }).waitFor();
    expect(await alice.page.getByTestId('member-name').filter({ hasText: 'Bob Brown' }).getAttribute('title')).toBe('bob');
    await alice.context.close();
    await bob.context.close();
  }, 90_000);

  it("the dashboard names a session's owner by their name from the provider, the subject in its title; a hand-over shows at once", async () => {
    const alice = await person(browser);
    await signInAs(alice.page, 'alice');
    const id = await startSession(alice.page);
    await alice.page.getByTitle('Back to the dashboard').first().click();
    const owner = alice.page.locator(`[data-testid=sessions] [data-session="${id}"] [data-testid=owner]`);
    await owner.filter({ hasText: 'Alice Adams' }).waitFor();
    expect(await owner.getAttribute('title')).toBe('alice');
    const bob = await person(browser);
    await signInAs(bob.page, 'bob');
    await bob.page.getByTestId('cannot-start').waitFor();
    // Alice hands the session to Bob from the library (a token of hers): her dashboard follows by push.
    const token = await mintToken({ key: loadKeyFile(stateKeyPath(state.path)), kind: 'client', sub: 'alice', ttlSeconds: 600 });
    const client = await GatewayClient.connect({ gateway: wsUrl, token, reconnect: false });
    try {
      await (await client.attach(id)).setOwner('bob');
    } finally {
      await client.close();
    }
    await owner.filter({ hasText: 'Bob Brown' }).waitFor();
    expect(await owner.getAttribute('title')).toBe('bob');
    expect(alice.errors).toEqual([]);
    await alice.context.close();
    await bob.context.close();
  }, 90_000);

  it('one sign-in serves every tab: a second tab, a reload and a session link need no new sign-in; Sign out ends both tabs', async () => {
    const alice = await person(browser);
    await signInAs(alice.page, 'alice');
    const id = await startSession(alice.page);
    const second = await alice.context.newPage();
    await second.goto(`${origin}/#session=${id}`); // a session link from chat
    await second.locator('[data-testid=transcript]').waitFor();
    await alice.page.reload();
    await alice.page.locator('[data-testid=transcript]').waitFor();
    // The cookie is for the gateway only: no script can read it.
    expect(await alice.page.evaluate(() => document.cookie)).not.toContain('tether_session');
    const [cookie] = (await alice.context.cookies(origin)).filter((c) => c.name === '__Host-tether_session');
    expect(cookie).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Strict', path: '/' });
    await alice.page.getByRole('button', { name: 'Sign out' }).click();
    await alice.page.getByRole('button', { name: 'Sign in with Test IdP' }).waitFor();
    // The other tab's link is closed by the gateway and its next ticket refused: it is signed out too.
    await second.getByRole('button', { name: 'Sign in with Test IdP' }).waitFor({ timeout: 10_000 });
    await second.reload();
    await second.getByRole('button', { name: 'Sign in with Test IdP' }).waitFor();
    await alice.context.close();
  }, 90_000);

  it('tether revoke --sub ends a browser sign-in within a second', async () => {
    const bob = await person(browser);
    await signInAs(bob.page, 'bob');
    await bob.page.getByTestId('cannot-start').waitFor();
    const revoked = await runTether(['revoke', '--sub', 'bob', '--state-dir', state.path], { env: env() });
    expect(revoked.code).toBe(0);
    // From the revocation on disk to the tab's link closed (the banner, or already the sign-in page).
    const tookMs = await waitFor(
      async () => (await bob.page.locator('[data-testid=link-banner], .signin').count()) > 0,
      1_000,
      'the revoked tab to lose its link',
    );
    expect(tookMs).toBeLessThanOrEqual(1_000);
    await bob.page
      .getByText(/revoked/)
      .first()
      .waitFor({ timeout: 10_000 }); // on the page, and said by its announcer
    await bob.context.close();
  }, 90_000);

  it('refuses a forged callback, a replayed one, one from another browser, and someone no group lets in, saying why', async () => {
    const mallory = await person(browser);
    const forged = await mallory.page.goto(`${origin}/v1/oidc/callback?code=made-up&state=made-up`);
    expect(forged!.status()).toBe(401);
    expect(await mallory.page.locator('#why').textContent()).toContain('was not started on this gateway');

    // A real callback, seen on its way: used once, then replayed.
    const alice = await person(browser);
    const callbacks: string[] = [];
    alice.page.on('request', (r) => {
      if (r.url().startsWith(`${origin}/v1/oidc/callback?`)) callbacks.push(r.url());
    });
    await signInAs(alice.page, 'alice');
    await alice.page.getByRole('button', { name: 'Start session' }).waitFor();
    expect(callbacks).toHaveLength(1);
    const replay = await alice.page.goto(callbacks[0]);
    expect(replay!.status()).toBe(401);
    expect(await alice.page.locator('#why').textContent()).toContain('already finished');

    // Login CSRF: mallory starts a sign-in and has eve's browser finish it; eve's browser lacks the state cookie.
    const started = await fetch(`${origin}/v1/oidc/start`, { redirect: 'manual' });
    expect(started.status).toBe(302);
    expect(started.headers.get('set-cookie')).toMatch(
      /^__Host-tether_oidc_state=[\w-]+; Path=\/; Max-Age=600; HttpOnly; Secure; SameSite=Lax$/,
    );
    const eve = await person(browser);
    await eve.page.goto(started.headers.get('location')!);
    await signInAtIdp(eve.page, 'alice', origin);
    expect(await eve.page.locator('#why').textContent()).toContain('started in another browser');
    expect((await eve.context.cookies(origin)).map((c) => c.name)).not.toContain('__Host-tether_session');

    const carol = await person(browser);
    await signInAs(carol.page, 'carol');
    expect(await carol.page.locator('#why').textContent()).toBe(
      "carol may not use this gateway: none of your groups (visitors) is given access in its oidc.scopes. Ask the gateway's administrator to add one.",
    );
    for (const p of [mallory, alice, eve, carol]) await p.context.close();
  }, 120_000);

  it('tether login: the browser signs in, hands the terminal a token through its loopback listener; tether sessions uses it; tether logout forgets it', async () => {
    const alice = await person(browser); // not signed in yet: the page signs her in first and comes back to the request
    const login = startTether(['login', '--gateway', wsUrl, '--no-browser'], { env: env() });
    try {
      const open = (await login.line('open: ')).slice('open: '.length);
      expect(open).toMatch(new RegExp(`^${origin}/#cli-login=\\d+\\.[\\w-]{43}\\.[\\w-]+$`));
      await alice.page.goto(open);
      await alice.page.getByRole('button', { name: 'Sign in with Test IdP' }).click();
      await signInAtIdp(alice.page, 'alice', origin);
      await alice.page.getByText('asks to act as').waitFor();
      expect(await alice.page.getByRole('strong').textContent()).toBe('Alice Adams');
      await alice.page.getByRole('button', { name: 'Allow' }).click();
      await alice.page.getByText('Signed in. You can close this tab').waitFor();
      const code = new URL(alice.page.url()).searchParams.get('code')!;
      expect(await login.stop('SIGCONT', 20_000)).toEqual({ code: 0, signal: null }); // it exits by itself once signed in
      expect(login.stdout()).toContain(`signed in to ${origin} as alice`);
      // The code was good once, and only with the terminal's verifier.
      const again = await fetch(`${origin}/v1/cli-token`, {
        method: 'POST',
        body: JSON.stringify({ code, code_verifier: 'x'.repeat(43) }),
      });
      expect(again.status).toBe(401);
    } finally {
      await login.stop('SIGKILL');
    }
    const file = join(home.path, '.tether', 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const kept = JSON.parse(readFileSync(file, 'utf8')) as { gateways: Record<string, { principal: string }> };
    expect(kept.gateways[origin].principal).toBe('alice');

    // Alice starts a session in the browser: the terminal lists her by the provider's name, the subject beside it.
    await alice.page.goto(`${origin}/`);
    const id = await startSession(alice.page);
    const sessions = await runTether(['sessions', '--gateway', wsUrl], { env: env() });
    expect(sessions.stderr).toBe('');
    expect(sessions.code).toBe(0);
    const row = sessions.stdout.split('\n').find((l) => l.startsWith(id));
    expect(row).toContain('Alice Adams (alice)'); // OWNER, and CLIENTS: her tab
    const listed = JSON.parse((await runTether(['sessions', '--json', '--gateway', wsUrl], { env: env() })).stdout) as {
      id: string;
      owner: string;
      owner_name?: string;
    }[];
    expect(listed.find((s) => s.id === id)).toMatchObject({ owner: 'alice', owner_name: 'Alice Adams' });
    // The token tether login keeps carries her name too (a terminal she attaches is named in presence; auth-tokens.test.ts).
    const token = (JSON.parse(readFileSync(file, 'utf8')) as { gateways: Record<string, { token: string }> }).gateways[origin].token;
    expect(JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'))).toMatchObject({ sub: 'alice', name: 'Alice Adams' });
    const overridden = await runTether(['sessions', '--gateway', wsUrl], { env: { ...env(), TETHER_TOKEN: 'not-a-token' } });
    expect(overridden.code).toBe(1); // TETHER_TOKEN wins over the kept token
    expect((await runTether(['logout', '--gateway', wsUrl], { env: env() })).stdout).toBe(`signed out of ${origin}\n`);
    const after = await runTether(['sessions', '--gateway', wsUrl], { env: env() });
    expect(after.code).toBe(1);
    expect(after.stderr).toContain('no token');
    await alice.context.close();
  }, 90_000);

  it('tether login --device: a person signed in on another device types the code the terminal shows; the terminal gets its token', async () => {
    const device = startTether(['login', '--device', '--gateway', wsUrl], { env: env() });
    try {
      expect(await device.line('open: ')).toBe(`open: ${origin}/#device`);
      const code = (await device.line('code: ')).slice('code: '.length);
      expect(code).toMatch(/^[B-Z]{4}-[B-Z]{4}$/);
      const alice = await person(browser);
      await alice.page.goto(`${origin}/#device`);
      await alice.page.getByRole('button', { name: 'Sign in with Test IdP' }).click();
      await signInAtIdp(alice.page, 'alice', origin);
      const typed = alice.page.getByLabel('Code the terminal shows');
      await typed.fill('BBBB-BBBB');
      await alice.page.getByRole('button', { name: 'Allow' }).click();
      await alice.page.getByRole('alert').filter({ hasText: 'no terminal is waiting for this code' }).waitFor();
      await typed.fill(code.toLowerCase().replace('-', ' ')); // as a person might type it
      await alice.page.getByRole('button', { name: 'Allow' }).click();
      await alice.page.getByText('The terminal is signed in as').waitFor();
      expect(await device.stop('SIGCONT', 20_000)).toEqual({ code: 0, signal: null }); // it exits by itself once approved
      expect(device.stdout()).toContain(`signed in to ${origin} as alice`);
      await alice.context.close();
    } finally {
      await device.stop('SIGKILL');
    }
    const sessions = await runTether(['sessions', '--gateway', wsUrl], { env: env() });
    expect(sessions.stderr).toBe('');
    expect(sessions.code).toBe(0);
  }, 90_000);

  // Last in this file: it restarts the gateway the other tests share.
  it('a gateway restart signs no browser out: the tab reloads signed in, as the same person', async () => {
    const alice = await person(browser);
    await signInAs(alice.page, 'alice');
    await alice.page.getByRole('button', { name: 'Start session' }).waitFor();
    expect(await up.stop('SIGTERM', 20_000)).toMatchObject({ code: 0 });
    const port = new URL(origin).port; // the cookie is the origin's: the gateway comes back where it was
    up = startTether(
      [
        'up',
        '--port',
        port,
        '--engine',
        'demo',
        '--cwd',
        cwd.path,
        '--state-dir',
        state.path,
        '--config',
        join(state.path, 'gateway.json'),
      ],
      {
        env: { ...env(), TETHER_OIDC_CLIENT_SECRET: idp.clientSecret },
      },
    );
    expect(await up.line('gateway: ')).toBe(`gateway: ${wsUrl}`);
    await alice.page.reload();
    await alice.page.getByRole('button', { name: 'Start session' }).waitFor();
    expect(await alice.page.getByTestId('principal').textContent()).toBe('Alice Adams');
    await alice.context.close();
  }, 90_000);
});
