import type * as Oidc from 'openid-client';
import { TetherError } from '../../core/errors.js';
import { OIDC_DEFAULTS } from './oidc-defaults.js';
import { silentLogger, type Logger } from '../../core/logging.js';
import type { BrowserIdentity } from './browser-sessions.js';
import { identityFromClaims, type ClaimRules } from './oidc-claims.js';

let oidcModule: Promise<typeof Oidc> | undefined;
/** openid-client (with oauth4webapi, ≈0.9 MB of heap) is loaded at the first sign-in: a gateway without OIDC never holds it. */
function loadOidc(): Promise<typeof Oidc> {
  oidcModule ??= import('openid-client');
  return oidcModule;
}

/** Options of {@link OidcSignIn} (config keys under `oidc`). */
export interface OidcOptions extends ClaimRules {
  /** The issuer URL (https, or http on a loopback address). */
  issuer: string;
  clientId: string;
  /** Absent: a public client (PKCE alone). */
  clientSecret?: string;
  /** The name on the page's button ("Sign in with NAME"; default the issuer's host). */
  displayName?: string;
  /** OAuth scopes asked for (default openid profile email groups). */
  requestScopes?: string[];
  logger?: Logger;
  now?: () => number;
}

interface Pending {
  verifier: string;
  nonce: string;
  redirectUri: string;
  returnTo: string;
  expiresAtMs: number;
}

/** Whether an issuer may be reached over plain http: only on this machine. */
export function isLoopbackHttp(url: URL): boolean {
  return url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}

/**
 * Web sign-in with OpenID Connect (authorization code + PKCE, via openid-client): `begin`
 * makes the identity provider's URL with a fresh state, nonce and PKCE verifier, kept here
 * for 10 minutes and bound to the browser by the state cookie; `finish` takes the callback
 * once (a replayed or forged state is refused before the provider is asked), trades the code
 * with the verifier, checks the ID token (issuer, audience, signature, nonce) and turns its
 * claims (with userinfo's, where the provider has it) into an identity by the claim rules.
 * The provider's metadata is discovered on first use and kept; a failed discovery is tried
 * again on the next sign-in.
 */
export class OidcSignIn {
  readonly displayName: string;
  private config: Promise<Oidc.Configuration> | undefined;
  private readonly pending = new Map<string, Pending>();
  private readonly log: Logger;
  private readonly now: () => number;

  constructor(private readonly opts: OidcOptions) {
    const issuer = new URL(opts.issuer);
    if (issuer.protocol !== 'https:' && !isLoopbackHttp(issuer))
      throw new TetherError('INVALID_ARGUMENT', `the OIDC issuer must be https (http only on this machine), got ${opts.issuer}`);
    this.displayName = opts.displayName ?? issuer.host;
    this.log = opts.logger ?? silentLogger;
    this.now = opts.now ?? Date.now;
  }

  /** The identity provider's authorization URL for a new sign-in, and its state (the browser keeps it in the state cookie). */
  async begin(redirectUri: string, returnTo: string): Promise<{ url: string; state: string }> {
    const config = await this.discovered();
    const oidc = await loadOidc();
    this.sweep();
    if (this.pending.size >= OIDC_DEFAULTS.maxPending) this.pending.delete(this.pending.keys().next().value!); // the oldest: a Map keeps insertion order
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    this.pending.set(state, { verifier, nonce, redirectUri, returnTo, expiresAtMs: this.now() + OIDC_DEFAULTS.pendingTtlMs });
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: (this.opts.requestScopes ?? OIDC_DEFAULTS.requestScopes).join(' '),
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    return { url: url.href, state };
  }

  /**
   * Finishes a sign-in from the callback URL the browser landed on. The state must be one
   * this gateway issued, not used before, within its 10 minutes, and the one in the browser's
   * state cookie (UNAUTHENTICATED, reason `oidc_state`); the provider's refusal, a bad code or
   * ID token is UNAUTHENTICATED (reason `oidc_refused`); claims that map to no scopes are
   * PERMISSION_DENIED (reason `no_scopes`). Every message is meant for the person.
   */
  async finish(callback: URL, stateCookie: string | undefined): Promise<{ identity: BrowserIdentity; returnTo: string }> {
    const state = callback.searchParams.get('state') ?? '';
    const p = this.pending.get(state);
    this.pending.delete(state); // taken once, whatever follows: a replay finds nothing
    if (!p || p.expiresAtMs <= this.now()) {
      throw new TetherError(
        'UNAUTHENTICATED',
        'this sign-in was not started on this gateway, was already finished, or took longer than 10 minutes. Start again from the gateway’s page.',
        { reason: 'oidc_state' },
      );
    }
    if (stateCookie !== state) {
      throw new TetherError(
        'UNAUTHENTICATED',
        'this sign-in was started in another browser (or its cookie was lost). Start again from the gateway’s page in this browser.',
        { reason: 'oidc_state' },
      );
    }
    const refused = callback.searchParams.get('error');
    if (refused) {
      const said = (callback.searchParams.get('error_description') ?? refused).slice(0, 200);
      throw new TetherError('UNAUTHENTICATED', `the identity provider did not sign you in (it said: ${said}).`, { reason: 'oidc_refused' });
    }
    const config = await this.discovered();
    const oidc = await loadOidc();
    let claims: Record<string, unknown>;
    try {
      const tokens = await oidc.authorizationCodeGrant(
        config,
        callback,
        { pkceCodeVerifier: p.verifier, expectedState: state, expectedNonce: p.nonce, idTokenExpected: true },
        { redirect_uri: p.redirectUri },
      );
      const id = tokens.claims()!;
      const info = config.serverMetadata().userinfo_endpoint ? await oidc.fetchUserInfo(config, tokens.access_token, id.sub) : {};
      claims = { ...info, ...id }; // the ID token's word wins; userinfo adds what it left out (groups, name)
    } catch (err) {
      this.log.warn({ event: 'auth.oidc_failed', err: (err as Error).message }, 'OIDC sign-in refused');
      throw new TetherError(
        'UNAUTHENTICATED',
        `the identity provider’s answer did not check out (${(err as Error).message.slice(0, 200)}). Start again from the gateway’s page.`,
        { reason: 'oidc_refused' },
      );
    }
    return { identity: identityFromClaims(claims, this.opts), returnTo: p.returnTo };
  }

  private discovered(): Promise<Oidc.Configuration> {
    const o = this.opts;
    const issuer = new URL(o.issuer);
    this.config ??= loadOidc()
      .then((oidc) =>
        oidc.discovery(issuer, o.clientId, undefined, o.clientSecret ? oidc.ClientSecretBasic(o.clientSecret) : oidc.None(), {
          execute: isLoopbackHttp(issuer) ? [oidc.allowInsecureRequests] : [],
          timeout: OIDC_DEFAULTS.requestTimeoutSec,
        }),
      )
      .catch((err: unknown) => {
        this.config = undefined; // the next sign-in tries again
        throw new TetherError(
          'UNAVAILABLE',
          `the identity provider at ${o.issuer} cannot be reached or answered oddly (${(err as Error).message.slice(0, 200)}); try again later`,
        );
      });
    return this.config;
  }

  private sweep(): void {
    const now = this.now();
    for (const [state, p] of this.pending) if (p.expiresAtMs <= now) this.pending.delete(state);
  }
}
