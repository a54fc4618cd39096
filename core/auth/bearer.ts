import { authError } from './auth-error.js';
import { MAX_TOKEN_CHARS } from './verify.js';

/** Longest Authorization header read; a longer one is refused by its length alone. */
export const MAX_AUTHORIZATION_CHARS = MAX_TOKEN_CHARS + 64;

/**
 * The token of an `Authorization: Bearer <token>` header (scheme case-insensitive). Throws
 * UNAUTHENTICATED when it is missing or not a bearer credential, and INVALID_ARGUMENT when
 * it is longer than {@link MAX_AUTHORIZATION_CHARS} (checked before anything else is read).
 */
export function bearerToken(header: string | undefined): string {
  if (header === undefined || header.trim() === '') {
    throw authError('UNAUTHENTICATED', 'missing', 'no token: send "Authorization: Bearer <token>" (tether token mints one)');
  }
  if (header.length > MAX_AUTHORIZATION_CHARS)
    throw authError('INVALID_ARGUMENT', 'too_large', `Authorization header too large (over ${MAX_AUTHORIZATION_CHARS} characters)`);
  const m = /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(header);
  if (!m) throw authError('UNAUTHENTICATED', 'malformed', 'the Authorization header is not "Bearer <token>"');
  return m[1];
}
