import { TetherError } from '../../core/errors.js';
import type { Role } from '../../core/protocol/events.js';
import type { Principal } from '../door/principal.js';

/** What the owner may decide about another principal. */
export type RoleDecision = 'controller' | 'viewer';

/** The owner's decisions by principal, as kept in the store. */
export type RoleDecisions = Record<string, RoleDecision>;

/**
 * Who gets which role on one session. The gateway decides, from three things only: the
 * token's scope (without `control`, a client is a viewer whatever its `sub`), the session's
 * owner, and the owner's decisions about other principals. Decisions are kept by principal,
 * not by connection, so a demoted client stays a viewer when it detaches and attaches again
 * or reconnects; `persist` writes them with the session so they also survive a restart.
 *
 * | token scope        | principal             | role           |
 * |--------------------|-----------------------|----------------|
 * | no `control`       | anyone (owner too)    | viewer         |
 * | `control`          | the owner             | owner          |
 * | `control`          | demoted by the owner  | viewer         |
 * | `control`          | anyone else           | controller     |
 *
 * `read_only` on attach always yields viewer (a client may ask for less, never for more).
 */
export class SessionRoles {
  private readonly decisions: Map<string, RoleDecision>;

  constructor(
    private currentOwner: string,
    restored: RoleDecisions = {},
    private readonly persist: (decisions: RoleDecisions) => void = () => {},
  ) {
    this.decisions = new Map(Object.entries(restored).filter(([, r]) => r === 'controller' || r === 'viewer'));
  }

  /** The session's owner now (session.set_owner may hand it over). */
  get owner(): string {
    return this.currentOwner;
  }

  /** Makes `principal` the owner; a decision kept about it goes (an owner's attachments follow their tokens). */
  setOwner(principal: string): void {
    this.currentOwner = principal;
    if (this.decisions.delete(principal)) this.persist(Object.fromEntries(this.decisions));
  }

  /** The role a client with principal `p` gets when it attaches (or creates the session). */
  roleFor(p: Principal, readOnly = false): Role {
    if (!p.canControl || readOnly) return 'viewer';
    if (p.sub === this.owner) return 'owner';
    return this.decisions.get(p.sub) ?? 'controller';
  }

  /** The owner's decision about `principal`, if any. */
  decided(principal: string): RoleDecision | undefined {
    return this.decisions.get(principal);
  }

  /**
   * Records the owner's decision about `principal` (written to the store before it returns).
   * The owner's own principal has no decision: its attachments follow their tokens.
   */
  decide(principal: string, role: RoleDecision): void {
    if (principal === this.owner || this.decisions.get(principal) === role) return;
    this.decisions.set(principal, role);
    this.persist(Object.fromEntries(this.decisions));
  }
}

/**
 * Checks that the token allows the control actions (send, stop, set_role), whatever role
 * its attachment has. Throws PERMISSION_DENIED.
 */
export function requireControlScope(p: Principal, action: string): void {
  if (!p.canControl) throw new TetherError('PERMISSION_DENIED', `this token may not ${action} (it has no control scope)`);
}
