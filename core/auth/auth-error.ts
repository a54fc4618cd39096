import { TetherError, type ErrorCode } from '../errors.js';

/**
 * Why a credential was refused, as a short stable key: what failure counters count and
 * what logs carry (`reason`). The message says the same for humans; neither ever contains
 * the token.
 */
export type AuthFailureReason =
  | 'missing'
  | 'too_large'
  | 'malformed'
  | 'bad_alg'
  | 'unknown_key'
  | 'bad_signature'
  | 'expired'
  | 'not_yet_valid'
  | 'missing_claim'
  | 'bad_claim'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'wrong_type'
  | 'bad_scope'
  | 'origin'
  | 'ticket_used'
  | 'login_used'
  | 'ticket_origin'
  | 'keys_unavailable'
  | 'wrong_kind'
  | 'wrong_agent'
  | 'agent_taken'
  | 'host_key'
  | 'rate_limited'
  | 'revoked'
  | 'no_session'
  | 'signed_out'
  | 'oidc_state'
  | 'oidc_refused'
  | 'no_scopes'
  | 'cli_code'
  | 'internal';

/** A refused credential: a TetherError whose details carry the reason. */
export function authError(code: ErrorCode, reason: AuthFailureReason, message: string): TetherError {
  return new TetherError(code, message, { reason });
}

/** The reason of an error made by {@link authError}, else 'internal'. */
export function authReason(err: unknown): AuthFailureReason {
  const reason = err instanceof TetherError ? err.details?.reason : undefined;
  return typeof reason === 'string' ? (reason as AuthFailureReason) : 'internal';
}
