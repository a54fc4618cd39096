import { errors } from 'jose';
import { TetherError } from '../errors.js';
import { authError } from './auth-error.js';

/** What the verifier expected, for messages that say what was wrong. */
export interface ExpectedClaims {
  issuer: string;
  audience: string;
  /** Header `alg` of the refused token, when it could be read (shown only if it looks like an algorithm name). */
  alg?: unknown;
}

/**
 * Turns anything jose (or our key lookup) threw while verifying into an UNAUTHENTICATED
 * error that says what was wrong ("token expired", "wrong audience", "signature invalid", …),
 * or UNAVAILABLE when the keys could not be fetched. Never includes the token.
 */
export function explainJoseError(err: unknown, expected: ExpectedClaims): TetherError {
  if (err instanceof TetherError) return err;
  if (err instanceof errors.JWTExpired) {
    return err.claim === 'iat'
      ? authError('UNAUTHENTICATED', 'expired', 'token too old (issued longer ago than this gateway accepts)')
      : authError('UNAUTHENTICATED', 'expired', 'token expired');
  }
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.reason === 'missing') return authError('UNAUTHENTICATED', 'missing_claim', `token has no "${err.claim}" claim`);
    switch (err.claim) {
      case 'nbf':
        return authError('UNAUTHENTICATED', 'not_yet_valid', 'token not yet valid (its nbf is in the future: check the clocks)');
      case 'iat':
        return authError('UNAUTHENTICATED', 'not_yet_valid', 'token issued in the future (check the clocks)');
      case 'iss':
        return authError('UNAUTHENTICATED', 'wrong_issuer', `wrong issuer (expected "${expected.issuer}")`);
      case 'aud':
        return authError('UNAUTHENTICATED', 'wrong_audience', `wrong audience (expected "${expected.audience}")`);
      case 'typ':
        return authError('UNAUTHENTICATED', 'wrong_type', 'wrong token type');
      default:
        return authError('UNAUTHENTICATED', 'bad_claim', `token claim "${err.claim}" is not valid`);
    }
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return authError('UNAUTHENTICATED', 'bad_signature', 'signature invalid');
  if (err instanceof errors.JOSEAlgNotAllowed)
    return authError('UNAUTHENTICATED', 'bad_alg', `algorithm ${algName(expected.alg)} is not accepted`);
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) {
    return authError('UNAUTHENTICATED', 'unknown_key', 'token signed by a key this gateway does not know');
  }
  if (err instanceof errors.JWKSTimeout)
    return authError('UNAVAILABLE', 'keys_unavailable', 'the key set (JWKS) did not answer in time; try again later');
  if (err instanceof errors.JWKSInvalid) return authError('UNAVAILABLE', 'keys_unavailable', 'the key set (JWKS) is not valid');
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid || err instanceof errors.JOSENotSupported) {
    return authError('UNAUTHENTICATED', 'malformed', `malformed token (${err.message.slice(0, 120)})`);
  }
  if (err instanceof errors.JOSEError)
    return authError('UNAVAILABLE', 'keys_unavailable', `keys unavailable (${err.message.slice(0, 120)})`);
  if (err instanceof TypeError) return authError('UNAUTHENTICATED', 'bad_alg', "the token's algorithm does not fit the key");
  return authError('UNAUTHENTICATED', 'internal', 'token could not be verified');
}

/** An attacker-chosen header value, shown only when it looks like an algorithm name. */
export function algName(alg: unknown): string {
  return typeof alg === 'string' && /^[A-Za-z0-9+-]{1,16}$/.test(alg) ? alg : '(unreadable)';
}
