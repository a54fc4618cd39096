import { authError } from '../../core/auth/auth-error.js';
import type { LoginDesk } from '../../core/auth/login-codes.js';
import { TetherError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/logging.js';
import type { BrowserSessions } from './browser-sessions.js';
import type { CliLoginDesk } from './cli-login.js';
import type { DoorRequest } from './door.js';
import type { OidcSignIn } from './oidc-sign-in.js';

/** Options of {@link WebSignIn}. */
export interface WebSignInOptions {
  /** Sign-in with an identity provider; absent: the page offers sign-in links only. */
  oidc?: OidcSignIn;
  /** `tether login`; absent: refused (the gateway has no key that can sign). */
  cli?: CliLoginDesk;
  login?: LoginDesk;
  browser?: BrowserSessions;
  /** The door's check around each request (Origin, failure budget, counting refusals). */
  guard: <T>(req: DoorRequest, work: () => Promise<T>) => Promise<T>;
  /** The redirect URI registered with the identity provider (default: the gateway's own origin + /v1/oidc/callback). */
  redirectUri?: string;
  logger?: Logger;
}

/** A return address the page may ask to come back to after signing in: a short hash of ours. */
const RETURN_TO = /^#[\w.=-]{0,256}$/;

/**
 * The browser's ways in and out besides the ticket: sign-in with the identity provider
 * (start and callback), sign-out, and the browser's half of `tether login`. Each runs inside
 * the door's guard, so the Origin list, the failed-authentication budget and the refusal
 * counters apply as to tokens and tickets.
 */
export class WebSignIn {
  private readonly log: Logger;

  constructor(private readonly opts: WebSignInOptions) {
    this.log = opts.logger ?? silentLogger;
  }

  /** What GET /v1/login adds for the page: the identity provider's name, when there is one. */
  get offer(): { oidc?: { name: string } } {
    return this.opts.oidc && this.opts.browser ? { oidc: { name: this.opts.oidc.displayName } } : {};
  }

  /** The configured redirect URI, if the gateway's own origin is not it (behind a proxy). */
  get redirectUri(): string | undefined {
    return this.opts.redirectUri;
  }

  /** GET /v1/oidc/start: the identity provider's URL to redirect to and the state for the cookie. */
  startOidc(req: DoorRequest, redirectUri: string, returnTo: string): Promise<{ url: string; state: string }> {
    return this.opts.guard(req, async () => {
      const oidc = this.needOidc();
      return oidc.begin(redirectUri, RETURN_TO.test(returnTo) ? returnTo : '');
    });
  }

  /** GET /v1/oidc/callback: the browser sign-in cookie for whoever the provider signed in, and where the page goes next. */
  finishOidc(req: DoorRequest, callback: URL, stateCookie: string | undefined): Promise<{ cookie: string; returnTo: string; sub: string }> {
    return this.opts.guard(req, async () => {
      const { identity, returnTo } = await this.needOidc().finish(callback, stateCookie);
      this.log.info(
        { remote: req.remote, principal: identity.sub, scopes: identity.scopes, event: 'auth.sign_in', via: 'oidc' },
        'signed in with the identity provider',
      );
      return { cookie: this.opts.browser!.create(identity), returnTo, sub: identity.sub };
    });
  }

  /** POST /v1/logout: ends the browser sign-in (every tab's connections close). Origin required. */
  signOut(req: DoorRequest): Promise<void> {
    return this.opts.guard(req, async () => {
      this.needBrowserPage(req);
      if (this.opts.browser?.end(req.cookie)) this.log.info({ remote: req.remote, event: 'auth.sign_out' }, 'signed out');
    });
  }

  /** POST /v1/cli-login: a one-time code for `tether login`, for the signed-in browser, bound to the CLI's challenge; with the sub it is for. */
  cliCode(req: DoorRequest, challenge: string): Promise<{ code: string; sub: string }> {
    return this.opts.guard(req, async () => {
      this.needBrowserPage(req);
      const cli = this.needCli();
      const s = this.opts.browser!.use(req.cookie);
      return { code: cli.issue(s.identity, challenge), sub: s.identity.sub };
    });
  }

  /** POST /v1/cli-token: `tether login` trades its code and verifier for a client token. */
  cliToken(req: DoorRequest, code: string, verifier: string): Promise<{ token: string; expires_in: number; principal: string }> {
    return this.opts.guard(req, async () => {
      const r = await this.needCli().redeem(code, verifier);
      this.log.info({ remote: req.remote, principal: r.sub, event: 'auth.sign_in', via: 'cli' }, 'tether login signed in');
      return { token: r.token, expires_in: r.expiresIn, principal: r.sub };
    });
  }

  /** POST /v1/device: `tether login --device` starts; no credential needed (what it starts is worthless until a signed-in person approves it). */
  deviceStart(req: DoorRequest): Promise<{ device_code: string; user_code: string; expires_in: number; interval: number }> {
    return this.opts.guard(req, async () => {
      const d = this.needCli().startDevice();
      return { device_code: d.deviceCode, user_code: d.userCode, expires_in: d.expiresIn, interval: d.interval };
    });
  }

  /** POST /v1/device/approve: the signed-in page approves the terminal showing `userCode` as this browser's person. Origin required. */
  deviceApprove(req: DoorRequest, userCode: string): Promise<{ principal: string }> {
    return this.opts.guard(req, async () => {
      this.needBrowserPage(req);
      const cli = this.needCli();
      const s = this.opts.browser!.use(req.cookie);
      cli.approveDevice(userCode, s.identity);
      this.log.info({ remote: req.remote, principal: s.identity.sub, event: 'auth.device_approved' }, 'a terminal sign-in approved');
      return { principal: s.identity.sub };
    });
  }

  /** POST /v1/cli-token with a device code: `{pending: true}` until approved, then the token, once. */
  devicePoll(req: DoorRequest, deviceCode: string): Promise<{ pending: true } | { token: string; expires_in: number; principal: string }> {
    return this.opts.guard(req, async () => {
      const r = await this.needCli().pollDevice(deviceCode);
      if (r === 'pending') return { pending: true as const };
      this.log.info({ remote: req.remote, principal: r.sub, event: 'auth.sign_in', via: 'device' }, 'tether login --device signed in');
      return { token: r.token, expires_in: r.expiresIn, principal: r.sub };
    });
  }

  private needCli(): CliLoginDesk {
    if (!this.opts.cli)
      throw new TetherError('FAILED_PRECONDITION', 'tether login is off on this gateway (it has no key that can sign tokens)');
    return this.opts.cli;
  }

  private needOidc(): OidcSignIn {
    if (!this.opts.oidc || !this.opts.browser)
      throw new TetherError(
        'FAILED_PRECONDITION',
        'sign-in with an identity provider is not set up on this gateway (tether gateway --oidc-issuer URL --oidc-client-id ID)',
      );
    return this.opts.oidc;
  }

  private needBrowserPage(req: DoorRequest): void {
    if (!this.opts.browser) throw new TetherError('FAILED_PRECONDITION', 'browser sign-ins are off on this gateway');
    if (req.origin === undefined)
      throw authError('PERMISSION_DENIED', 'origin', "only the gateway's page may do this (the request has no Origin)");
  }
}
