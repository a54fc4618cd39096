/**
 * The page's link to the gateway: the credential (this browser's sign-in cookie, which every
 * tab shares and no script can read; or, where the browser keeps no cookie, a client token
 * kept for this tab in sessionStorage), a fresh single-use ticket for every WebSocket
 * (POST /v1/ticket, docs/protocol.md), hello, and reconnection with backoff. Sessions
 * re-attach themselves from their last seq when `onReconnect` fires.
 */
import { HEARTBEAT_DEFAULTS } from '../../../core/link/heartbeat.js';
import { backoffDelay, CLIENT_BACKOFF } from '../../../core/util/backoff.js';
import {
  CLI_LOGIN_PATH,
  DEVICE_APPROVE_PATH,
  LOGIN_PATH,
  LOGOUT_PATH,
  OIDC_START_PATH,
  TICKET_PATH,
  WS_PATH,
} from '../../../core/protocol/http-paths.js';
import { CAPABILITIES, PROTOCOL_VERSION } from '../../../core/protocol/version.js';
import { ERROR_CODES, TetherError, type ErrorCode } from '../../../core/errors.js';
import { RpcSocket } from './rpc';
import { Store } from './store';
import { linkTrouble } from './wording';

/** Where the tab keeps its client token (gone when the tab closes). */
const TOKEN_KEY = 'tether.token';
const PRINCIPAL_KEY = 'tether.principal';
/** How often the page checks its link for silence. */
const WATCH_TICK_MS = 1_000;
/** While the browser says it is offline, the pause between tries (the online event ends it early). */
const OFFLINE_PAUSE_MS = 5_000;

export type LinkStatus = 'signed-out' | 'connecting' | 'connected' | 'down' | 'resuming';

export interface LinkState {
  status: LinkStatus;
  principal?: string;
  /** The person's display name from the identity provider, where known. */
  name?: string;
  /** The identity provider the page may offer ("Sign in with NAME"), if the gateway has one. */
  oidc?: { name: string };
  /** Why the page is signed out or the link is down, for the person. */
  message?: string;
  /** Whether the gateway checks tokens at all (false: --auth off). */
  auth: boolean;
  /** What the token lets this page do (from hello; both true when the gateway does not say). */
  may: { create: boolean; control: boolean };
}

/** The error body the gateway's HTTP endpoints answer with. */
async function httpError(res: Response): Promise<TetherError> {
  const body = await res.json().catch(() => undefined);
  const named = body?.error?.code;
  const code: ErrorCode = (ERROR_CODES as readonly unknown[]).includes(named)
    ? named
    : res.status === 401
      ? 'UNAUTHENTICATED'
      : 'UNAVAILABLE';
  const reason = body?.error?.reason;
  return new TetherError(code, String(body?.error?.message ?? `HTTP ${res.status}`), typeof reason === 'string' ? { reason } : undefined);
}

/** JSON POST to one of the gateway's endpoints (the sign-in cookie goes with it: same origin); its refusal as a TetherError. */
async function post<T>(path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method: 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(HEARTBEAT_DEFAULTS.timeoutMs),
  });
  if (!res.ok) throw await httpError(res);
  return (res.status === 204 ? undefined : await res.json()) as T;
}

/** A JSON call to the gateway's API as this tab's person: the tab's own token where it has one, else the sign-in cookie. */
export async function apiCall<T>(path: string, body: unknown = {}, method: 'POST' | 'DELETE' = 'POST'): Promise<T> {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const res = await fetch(path, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(HEARTBEAT_DEFAULTS.timeoutMs),
  });
  if (!res.ok) throw await httpError(res);
  return (await res.json()) as T;
}

export class Connection {
  readonly state = new Store<LinkState>({ status: 'signed-out', auth: true, may: { create: true, control: true } });
  private sock: RpcSocket | undefined;
  private stopped = false;
  private attempt = 0;
  private readonly notified = new Set<(method: string, params: any) => void>();
  /** Ends the current reconnect pause early (the browser came back online). */
  private wake: (() => void) | undefined;
  private readonly reconnected = new Set<(request: RpcSocket['request']) => Promise<void>>();

  /**
   * Signs in with a code from a sign-in link. Where the gateway set this browser's sign-in
   * cookie (every tab shares it, Sign out ends it everywhere), the token is not kept; where
   * the browser keeps no cookie (plain http off this machine), the tab keeps the token.
   */
  async signIn(code: string): Promise<void> {
    const res = await fetch(LOGIN_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code }),
    });
    if (!res.ok) throw await httpError(res);
    const body = (await res.json()) as { token: string; principal: string; browser_session?: boolean };
    if (body.browser_session) return;
    sessionStorage.setItem(TOKEN_KEY, body.token);
    sessionStorage.setItem(PRINCIPAL_KEY, body.principal);
  }

  /** Asks the gateway whether it checks tokens at all, and which identity provider it offers. */
  async probe(): Promise<void> {
    const res = await fetch(LOGIN_PATH).catch(() => undefined);
    const body = res?.ok ? await res.json() : undefined;
    this.state.update({ auth: body?.auth !== 'off', oidc: typeof body?.oidc?.name === 'string' ? { name: body.oidc.name } : undefined });
  }

  /** Goes to the identity provider's sign-in; the page comes back to `returnTo` (a hash of ours) signed in. */
  signInWithProvider(returnTo = ''): void {
    location.assign(`${OIDC_START_PATH}${returnTo ? `?return=${encodeURIComponent(returnTo)}` : ''}`);
  }

  /** Sign out: ends this browser's sign-in on the gateway (every tab's link closes), then here. */
  async logOut(): Promise<void> {
    await post(LOGOUT_PATH).catch(() => undefined); // signed out here whatever the gateway said
    this.signOut();
  }

  /** `tether login` on this computer: a one-time code for its loopback listener; resolves with the URL to go to. */
  async cliLogin(port: number, challenge: string, state: string): Promise<string> {
    return (await post<{ redirect: string }>(CLI_LOGIN_PATH, { port, challenge, state })).redirect;
  }

  /** `tether login --device` elsewhere: approves the terminal showing `userCode` as this browser's person. */
  async approveDevice(userCode: string): Promise<void> {
    await post(DEVICE_APPROVE_PATH, { user_code: userCode });
  }

  /** Forgets the credential and closes the link. */
  signOut(message = 'Signed out.'): void {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(PRINCIPAL_KEY);
    this.stopped = true;
    this.sock?.close();
    this.sock = undefined;
    this.state.update({ status: 'signed-out', principal: undefined, message });
  }

  /** Called with every notification of the gateway. */
  onNotification(fn: (method: string, params: any) => void): () => void {
    this.notified.add(fn);
    return () => this.notified.delete(fn);
  }

  /**
   * Called after every reconnect (not the first connect), with the new socket's request
   * function; the link reports `connected` once every callback settled (sessions re-attach
   * here, so the banner stays up until the history is back).
   */
  onReconnect(fn: (request: RpcSocket['request']) => Promise<void>): () => void {
    this.reconnected.add(fn);
    return () => this.reconnected.delete(fn);
  }

  constructor() {
    // A phone that loses its network often keeps a dead socket open for a long time: when the
    // browser says it is offline, drop the link at once; when it is back, retry at once.
    window.addEventListener('offline', () => {
      const sock = this.sock;
      if (sock) this.lost(sock, 'the browser is offline');
      sock?.close();
    });
    window.addEventListener('online', () => {
      this.attempt = 0;
      this.wake?.();
    });
  }

  /**
   * Connects (and keeps reconnecting until signOut). Resolves after the first hello, or at
   * once when that failed: refused credentials sign the tab out; anything else keeps the
   * credential and retries in the background, the banner saying so.
   */
  async start(): Promise<void> {
    this.stopped = false;
    this.state.update({ status: 'connecting', message: undefined });
    try {
      await this.connectOnce(false);
    } catch (err) {
      // No sign-in in this browser yet: the sign-in page, with nothing to apologise for.
      if (err instanceof TetherError && err.details?.reason === 'no_session') return this.signOut('');
      if (err instanceof TetherError && err.code === 'UNAUTHENTICATED') return this.signOut(`Signed out: ${err.message}`);
      this.state.update({ status: 'down', message: `Cannot reach the gateway (${linkTrouble(err)}); retrying…` });
      void this.retry();
    }
  }

  /** One request on the live link; waits for a reconnect when the link is down (bounded). */
  async request<T = any>(method: string, params: unknown = {}): Promise<T> {
    const sock = await this.live();
    return sock.request<T>(method, params);
  }

  /**
   * Sends one engine input with a fixed input id, again after a reconnect when the link
   * failed under it: the gateway applies each input id once, so nothing runs twice.
   */
  async send(sessionId: string, line: Record<string, unknown>, inputId: string = crypto.randomUUID()): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.request('session.send', { session_id: sessionId, input_id: inputId, line });
        return;
      } catch (err) {
        if (!(err instanceof TetherError) || !err.retryable || attempt >= 10) throw err;
        await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** attempt)));
      }
    }
  }

  private async live(): Promise<RpcSocket> {
    const deadline = Date.now() + 30_000;
    while (!this.sock || this.state.get().status !== 'connected') {
      if (this.stopped) throw new TetherError('UNAUTHENTICATED', 'signed out');
      if (Date.now() > deadline) throw new TetherError('UNAVAILABLE', 'the gateway is not reachable');
      await new Promise<void>((resolve) => {
        const off = this.state.subscribe(() => {
          off();
          resolve();
        });
        setTimeout(() => {
          off();
          resolve();
        }, 1_000);
      });
    }
    return this.sock;
  }

  private async wsUrl(): Promise<string> {
    const base = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${WS_PATH}`;
    if (!this.state.get().auth) return base;
    // The tab's own token where it has one, else this browser's sign-in cookie (sent by the browser, same origin).
    const token = sessionStorage.getItem(TOKEN_KEY);
    const res = await fetch(TICKET_PATH, {
      method: 'POST',
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(HEARTBEAT_DEFAULTS.timeoutMs),
    });
    if (!res.ok) throw await httpError(res);
    const { ticket } = (await res.json()) as { ticket: string };
    return `${base}?ticket=${encodeURIComponent(ticket)}`;
  }

  private async connectOnce(isReconnect: boolean): Promise<void> {
    const sock = await RpcSocket.open(
      await this.wsUrl(),
      (m, p) => {
        for (const fn of this.notified) fn(m, p);
      },
      HEARTBEAT_DEFAULTS.timeoutMs,
    );
    let hello: { principal: string; principal_name?: string; may?: LinkState['may'] };
    try {
      hello = await sock.request<{ principal: string; principal_name?: string; may?: LinkState['may'] }>(
        'hello',
        { protocol_version: PROTOCOL_VERSION, role: 'client', capabilities: [CAPABILITIES.joinedReplay], software: 'tether-web' },
        HEARTBEAT_DEFAULTS.timeoutMs,
      );
    } catch (err) {
      sock.close(); // a refused hello leaves no socket behind
      throw err;
    }
    if (this.stopped) {
      sock.close();
      return;
    }
    this.sock = sock;
    this.attempt = 0;
    this.state.update({
      status: isReconnect ? 'resuming' : 'connected',
      principal: hello.principal,
      name: hello.principal_name,
      message: undefined,
      may: hello.may ?? { create: true, control: true },
    });
    void sock.closed.then((reason) => this.lost(sock, reason));
    this.watch(sock);
    if (isReconnect) {
      const request: RpcSocket['request'] = (m, p) => sock.request(m, p);
      await Promise.allSettled([...this.reconnected].map((fn) => fn(request)));
      if (this.sock === sock) this.state.update({ status: 'connected' });
    }
  }

  /**
   * Notices a link that stopped carrying bytes without closing (a stalled network keeps the
   * socket open): silent for the gateway's ping interval, the page pings; no answer and no
   * byte within the ping timeout, the link counts as lost, within the gateway's own bound.
   */
  private watch(sock: RpcSocket): void {
    const { intervalMs, timeoutMs } = HEARTBEAT_DEFAULTS;
    let probing = false;
    const timer = window.setInterval(() => {
      if (this.sock !== sock) return clearInterval(timer);
      if (probing || Date.now() - sock.lastHeardAt < intervalMs) return;
      probing = true;
      const asked = Date.now();
      sock.request('ping', {}, timeoutMs).then(
        () => (probing = false),
        () => {
          probing = false;
          if (this.sock !== sock || sock.lastHeardAt > asked) return;
          clearInterval(timer);
          this.lost(sock, `nothing arrived for ${Math.round((Date.now() - sock.lastHeardAt) / 1000)} s: it went silent`);
          sock.close();
        },
      );
    }, WATCH_TICK_MS);
  }

  private lost(sock: RpcSocket, reason: string): void {
    if (this.sock !== sock || this.stopped) return;
    this.sock = undefined;
    this.state.update({ status: 'down', message: `Connection to the gateway lost (${linkTrouble(new Error(reason))}); reconnecting…` });
    void this.retry();
  }

  private async retry(): Promise<void> {
    while (!this.stopped) {
      const pause = backoffDelay(this.attempt++, CLIENT_BACKOFF);
      await new Promise<void>((r) => {
        this.wake = r;
        setTimeout(r, navigator.onLine ? pause : Math.min(pause, OFFLINE_PAUSE_MS));
      });
      this.wake = undefined;
      if (this.stopped) return;
      try {
        this.state.update({ status: 'resuming', message: 'Reconnecting and resuming…' });
        await this.connectOnce(true);
        return;
      } catch (err) {
        if (err instanceof TetherError && err.code === 'UNAUTHENTICATED') return this.signOut(`Signed out: ${err.message}`);
        this.state.update({ status: 'down', message: `Still no connection to the gateway (${linkTrouble(err)}); retrying…` });
      }
    }
  }
}
