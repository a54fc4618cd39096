/**
 * A real OpenID provider for tests: oidc-provider on 127.0.0.1 port 0, with one confidential
 * test client and the accounts a test names (each with a name and groups). Its development
 * sign-in form takes any login that is an account here (any password) and then asks for
 * consent: Chromium fills both like a person. The client is registered once the gateway's
 * redirect URI is known (`register`), since the gateway listens on port 0 too.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import Provider from 'oidc-provider';
import { waitFor } from './wait.js';

export interface TestAccount {
  name: string;
  email: string;
  groups: string[];
}

export interface TestIdp {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Registers the test client with this redirect URI (the gateway's callback); call before any sign-in. */
  register(redirectUri: string): void;
  close(): Promise<void>;
}

export async function startTestIdp(accounts: Record<string, TestAccount>): Promise<TestIdp> {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(503).end('not ready');
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = 'tether-test';
  const clientSecret = 'a-test-client-secret-of-some-length';
  return {
    issuer,
    clientId,
    clientSecret,
    register(redirectUri) {
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: [redirectUri],
            grant_types: ['authorization_code'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        claims: { openid: ['sub'], profile: ['name'], email: ['email'], groups: ['groups'] },
        scopes: ['openid', 'profile', 'email', 'groups'],
        pkce: { required: () => true },
        ttl: { AccessToken: 600, AuthorizationCode: 60, Grant: 600, IdToken: 600, Interaction: 600, Session: 600 },
        cookies: { keys: ['test-cookie-key-0123456789'] },
        async findAccount(_ctx, id) {
          const a = accounts[id];
          return a ? { accountId: id, claims: async () => ({ sub: id, ...a }) } : undefined;
        },
      });
      provider.on('server_error', () => undefined); // a test's refusal paths are expected; the test asserts what the gateway says
      handler = provider.callback();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Signs in at the provider's development form as `login` and consents when it asks, as a
 * person would; resolves once the browser has left the provider (back at `gatewayOrigin`,
 * or on a page of the provider's own that is not a form: its refusal).
 */
export async function signInAtIdp(page: Page, login: string, gatewayOrigin: string): Promise<void> {
  await page.locator('input[name=login]').fill(login);
  await page.locator('input[name=password]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  const consent = page.getByRole('button', { name: 'Continue' });
  await waitFor(
    async () => {
      if (page.url().startsWith(gatewayOrigin)) return true;
      if (await consent.isVisible()) await consent.click().catch(() => undefined); // the page may move on under the click
      return false;
    },
    15_000,
    () => `the identity provider to send the browser back to ${gatewayOrigin} (at ${page.url()})`,
  );
  await page.waitForLoadState();
}
