import type { IncomingMessage } from 'node:http';

/**
 * The browser sign-in cookie: `__Host-` (Secure, Path=/, no Domain: only this origin can set
 * or read it), HttpOnly (no script reads it), SameSite=Strict (never sent by another site's
 * request). Browsers keep Secure cookies over https and on http://127.0.0.1 and localhost;
 * on plain http elsewhere they drop it, and the page keeps the tab's token instead.
 */
export const SESSION_COOKIE = '__Host-tether_session';
/** The sign-in-in-progress cookie: Lax, because the identity provider's redirect back is a cross-site navigation. */
export const STATE_COOKIE = '__Host-tether_oidc_state';

/**
 * Whether the browser will keep a Secure cookie from this request: over TLS, or on a
 * loopback address (browsers treat http://127.0.0.1 and localhost as secure contexts).
 */
export function keepsSecureCookies(req: IncomingMessage): boolean {
  if ((req.socket as { encrypted?: boolean }).encrypted) return true;
  const host = (req.headers.host ?? '').replace(/:\d+$/, '');
  return host === '127.0.0.1' || host === 'localhost' || host === '[::1]';
}

/** One cookie from a request's Cookie header (the first of that name), or undefined. */
export function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** A Set-Cookie value for one of our cookies; `maxAgeSec` 0 deletes it. */
export function setCookie(name: string, value: string, maxAgeSec: number, sameSite: 'Strict' | 'Lax' = 'Strict'): string {
  return `${name}=${value}; Path=/; Max-Age=${maxAgeSec}; HttpOnly; Secure; SameSite=${sameSite}`;
}
