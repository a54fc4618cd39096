import { checkScopes } from '../../core/auth/scopes.js';
import { TetherError } from '../../core/errors.js';
import type { BrowserIdentity } from './browser-sessions.js';

/** The key of `oidc.scopes` that every signed-in person matches. */
export const EVERYONE = '*';

/** How the ID token's claims become a principal (config keys under `oidc`). */
export interface ClaimRules {
  /** The claim that becomes the principal (default `sub`; e.g. `email`). */
  principalClaim: string;
  /** The claim holding the person's groups (default `groups`): a list, or one string. */
  groupsClaim: string;
  /** Group or claim value → scopes; `*` matches everyone. A person matching none is refused. */
  scopes: Record<string, string[]>;
}

/**
 * The identity the claims of a signed-in person grant: the principal claim as `sub`, the
 * `name` claim as display name, and the union of the scopes mapped to each of their groups
 * and to their principal value (and `*`). PERMISSION_DENIED (reason `no_scopes`) in plain
 * words when the principal claim is missing or nothing is mapped to them: fail closed.
 */
export function identityFromClaims(claims: Record<string, unknown>, rules: ClaimRules): BrowserIdentity {
  const raw = claims[rules.principalClaim];
  if (typeof raw !== 'string' || raw === '') {
    throw new TetherError(
      'PERMISSION_DENIED',
      `the identity provider did not say who you are: your sign-in has no "${rules.principalClaim}" (the gateway's oidc.principalClaim)`,
      { reason: 'no_scopes' },
    );
  }
  const groups = groupsOf(claims[rules.groupsClaim]);
  const matched = [EVERYONE, raw, ...groups].filter((k) => Object.hasOwn(rules.scopes, k));
  if (matched.length === 0) {
    const yours = groups.length
      ? `your groups (${groups.slice(0, 10).join(', ')})`
      : 'your account (the identity provider named no groups)';
    throw new TetherError(
      'PERMISSION_DENIED',
      `${raw} may not use this gateway: none of ${yours} is given access in its oidc.scopes. Ask the gateway's administrator to add one.`,
      { reason: 'no_scopes' },
    );
  }
  const scopes = checkScopes(matched.flatMap((k) => rules.scopes[k]));
  const name = typeof claims.name === 'string' && claims.name.trim() ? claims.name.trim().slice(0, 128) : undefined;
  return { sub: raw, name, scopes, via: 'oidc' };
}

/** A groups claim as a list of strings (a list, a space-free string, or nothing). */
function groupsOf(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  return Array.isArray(v) ? v.filter((g): g is string => typeof g === 'string') : [];
}
