import type { Principal } from '../../core/auth/principal.js';

/** Defined in core/auth (tokens are turned into principals there); re-exported for routing. */
export type { Principal } from '../../core/auth/principal.js';

/** The principal used while authentication is off: trusted local use only. */
export const ANONYMOUS: Principal = { sub: 'anonymous', kind: 'any', canCreate: true, canControl: true, canAdmin: true };
