/**
 * The token kinds and the fixed claims every Tether token carries. Each kind has its own
 * `typ` header (RFC 8725 §3.11), so a token of one kind can never pass as another: an agent
 * token never opens a client connection, a browser ticket is never a bearer token.
 */

/** `iss` of every token Tether mints (and the default one it accepts). */
export const TOKEN_ISSUER = 'tether';

/** `aud` of every token Tether mints (and the default one it accepts). */
export const TOKEN_AUDIENCE = 'tether-gateway';

/**
 * A token kind: an agent registering, a client connecting, a one-time browser ticket, or a
 * single-use sign-in code for the web page (login-codes.ts), traded once for a client token.
 */
export type TokenKind = 'agent' | 'client' | 'ticket' | 'login';

/** `typ` header per kind. */
export const TOKEN_TYP: Record<TokenKind, string> = {
  agent: 'tether-agent+jwt',
  client: 'tether-client+jwt',
  ticket: 'tether-ticket+jwt',
  login: 'tether-login+jwt',
};

/** The kind a `typ` header names (case-insensitive, `application/` prefix allowed), if any. */
export function kindOfTyp(typ: unknown): TokenKind | undefined {
  if (typeof typ !== 'string') return undefined;
  const t = typ.toLowerCase().replace(/^application\//, '');
  for (const [kind, value] of Object.entries(TOKEN_TYP)) if (value === t) return kind as TokenKind;
  return undefined;
}
