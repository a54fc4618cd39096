import { decodeProtectedHeader } from 'jose';
import { authError } from './auth-error.js';
import { kindOfTyp, type TokenKind } from './token-kinds.js';

/** The form of a compact JWS: three base64url parts (the signature may be empty, and is then refused by the verify). */
export const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** The longest ticket or sign-in code read: they are short, so anything longer is not one of ours. */
const MAX_CODE_CHARS = 4096;

/**
 * The token kind a ticket or sign-in code claims by its `typ` header, read before any
 * signature is checked (undefined for a `typ` that is none of ours). Text that is not a
 * compact JWS of at most 4096 characters with a readable header is refused with
 * UNAUTHENTICATED, reason `malformed`, saying "malformed `what`".
 */
export function claimedKind(text: string, what: string): TokenKind | undefined {
  if (text.length > MAX_CODE_CHARS || !COMPACT_JWS.test(text)) throw authError('UNAUTHENTICATED', 'malformed', `malformed ${what}`);
  try {
    return kindOfTyp(decodeProtectedHeader(text).typ);
  } catch {
    throw authError('UNAUTHENTICATED', 'malformed', `malformed ${what}`);
  }
}
