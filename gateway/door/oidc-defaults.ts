/** Bounds of sign-ins in progress. */
export const OIDC_DEFAULTS = {
  /** A sign-in must come back from the identity provider within this. */
  pendingTtlMs: 10 * 60_000,
  /** Sign-ins in progress at most; beyond, the oldest is dropped (a flood of starts cannot lock everyone out). */
  maxPending: 10_000,
  /** The identity provider's discovery, token and userinfo answers must come within this. */
  requestTimeoutSec: 10,
  /** What the gateway asks the identity provider for. */
  requestScopes: ['openid', 'profile', 'email', 'groups'],
};
