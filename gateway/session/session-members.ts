import { TetherError } from '../../core/errors.js';
import type { Role } from '../../core/protocol/events.js';
import type { SessionInfo } from '../../core/protocol/methods.js';
import type { ControlRouting } from './control-routing.js';
import type { SessionHistory } from './history/session-history.js';
import type { SessionAudit } from './session-audit.js';
import type { RoleDecision, SessionRoles } from './session-roles.js';
import { PresenceBatch } from './presence-batch.js';
import type { FrameBytes } from '../../core/wire/session-frame.js';

/** Why a member left, for its detach record: set only when the gateway cut the connection (see cutOf). */
export type Cut = { code: string; reason: string };

/** One attached client as the session sees it: transport-blind. */
export interface Member {
  readonly clientId: string;
  readonly principal: string;
  readonly transport: string;
  /** Whether the client's token allows control (told to members in presence; undefined: not known here). */
  readonly mayControl?: boolean;
  /** The display name from the identity provider, told to members beside the principal (undefined: none). */
  readonly name?: string;
  /**
   * Queues one session.frame notification for this client: the same bytes (UTF-8 JSON) go to
   * every member, so the client edge must not modify them. `readAtMs`: when the agent read the
   * engine line it carries (live engine frames only, for the relay latency).
   */
  sendFrame(frame: FrameBytes, readAtMs?: number): void;
  /** Queues an attach's replay, in order (absent: each frame through {@link sendFrame}). */
  sendReplay?(frames: FrameBytes[]): void;
  /** Delivers the engine's answer to this client's own control request. */
  sendReply(sessionId: string, line: string): void;
}

/** One member with its role on the session. */
export interface Attachment {
  member: Member;
  role: Role;
  since: string;
}

/** What the members of one session work with: the session's other parts. */
export interface MemberParts {
  sessionId: string;
  maxMembers: number;
  history: SessionHistory;
  audit: SessionAudit;
  roles: SessionRoles;
  controls: ControlRouting;
  /** Told when a member asked for history older than the log holds. */
  onGap: () => void;
}

/**
 * Who is attached to one session and with which role: attach (history first, then the live
 * stream), detach, and the owner's role changes. Every change is audited and shown to all
 * (as `presence` events, coalesced: see PresenceBatch).
 */
export class SessionMembers {
  private readonly all = new Map<string, Attachment>();
  /** Presence changes on their way to everyone, coalesced (a burst of attaches is one event). */
  private readonly presence: PresenceBatch;

  constructor(private readonly s: MemberParts) {
    this.presence = new PresenceBatch(
      (event) => s.history.append({ event }),
      () => this.all.size,
    );
    s.history.holdBack(this.presence);
  }

  /** The session is being dropped: presence changes still held are not appended to a store that forgot it. */
  dispose(): void {
    this.presence.dispose();
  }

  /** The attachment of `clientId`; throws FAILED_PRECONDITION when it is not attached. */
  attached(clientId: string): Attachment {
    const a = this.all.get(clientId);
    if (!a) throw new TetherError('FAILED_PRECONDITION', `not attached to session ${this.s.sessionId}`);
    return a;
  }

  /** How many members are attached. */
  get count(): number {
    return this.all.size;
  }

  roleOf(clientId: string): Role | undefined {
    return this.all.get(clientId)?.role;
  }

  principalOf(clientId: string): string | undefined {
    return this.all.get(clientId)?.member.principal;
  }

  /** Hands one frame to every member attached now. */
  deliver(bytes: FrameBytes, readAtMs?: number): void {
    for (const a of this.all.values()) a.member.sendFrame(bytes, readAtMs);
  }

  /** Sends the engine's answer to a client's own control request (the router checked it is attached). */
  reply(clientId: string, line: string): void {
    this.all.get(clientId)?.member.sendReply(this.s.sessionId, line);
  }

  has(clientId: string): boolean {
    return this.all.has(clientId);
  }

  /** The display name of an attached member of `principal`, if one has a name. */
  nameOf(principal: string): string | undefined {
    for (const a of this.all.values()) if (a.member.principal === principal && a.member.name !== undefined) return a.member.name;
    return undefined;
  }

  /** The members as `SessionInfo.clients` lists them: the earliest `max` (default all). */
  info(max = Infinity): SessionInfo['clients'] {
    const listed = [...this.all.values()];
    if (listed.length > max) listed.length = max;
    return listed.map((a) => ({
      client_id: a.member.clientId,
      principal: a.member.principal,
      role: a.role,
      transport: a.member.transport,
      since: a.since,
      ...(a.member.mayControl === undefined ? {} : { may_control: a.member.mayControl }),
      ...(a.member.name === undefined ? {} : { name: a.member.name }),
    }));
  }

  /**
   * Attaches a member and queues history from `fromSeq` (default: the beginning) followed
   * by the live stream. A position older than the log holds yields a gap notice first.
   * Returns the seq of the next frame.
   */
  attach(member: Member, role: Role, fromSeq?: number, previousClientId?: string): number {
    if (this.all.size >= this.s.maxMembers && !this.all.has(member.clientId)) {
      throw new TetherError('RESOURCE_EXHAUSTED', `session ${this.s.sessionId} already has ${this.s.maxMembers} clients attached`);
    }
    const from = fromSeq ?? 1;
    this.s.audit.record(member.principal, 'attach', { client_id: member.clientId, role, from_seq: from });
    const replay: FrameBytes[] = [];
    if (this.s.history.replayTo((bytes) => replay.push(bytes), from)) this.s.onGap();
    if (member.sendReplay) member.sendReplay(replay);
    else for (const bytes of replay) member.sendFrame(bytes);
    this.all.set(member.clientId, { member, role, since: new Date().toISOString() });
    if (previousClientId !== undefined)
      for (const line of this.s.controls.takeOver(previousClientId, member.clientId, member.principal))
        member.sendReply(this.s.sessionId, line);
    this.announce('attached', member.principal, member.clientId, role, member.mayControl, member.name);
    return this.s.history.lastSeq + 1;
  }

  /**
   * `cut`: the gateway ended the client's connection (token revoked or expired, slow consumer,
   * heartbeat, shutdown): the record says so, with the code and reason the client was given.
   */
  detach(clientId: string, cut?: Cut): void {
    const a = this.all.get(clientId);
    if (!a) return;
    const details = cut ? { client_id: clientId, cut: cut.code, cut_reason: cut.reason } : { client_id: clientId };
    this.s.audit.quietly(a.member.principal, 'detach', details); // leaving never waits on the audit
    this.all.delete(clientId);
    // Requests in flight stay mapped: a client that re-attaches with previous_client_id gets its answers.
    this.announce('detached', a.member.principal, clientId, a.role, undefined, a.member.name);
  }

  /**
   * The owner hands control to another attached client, or takes it back. Only an owner
   * may do it; `mayControl` says whether a client's token allows control at all. The
   * decision is about the target's principal: kept (and stored) so that principal's later
   * attachments get it too, and applied now to each of its attachments. A client of the
   * owner's own principal (attached read-only) changes alone, with no decision kept.
   */
  setRole(byClientId: string, targetClientId: string, role: RoleDecision, mayControl: (clientId: string) => boolean): void {
    const by = this.attached(byClientId);
    if (by.role !== 'owner') throw new TetherError('PERMISSION_DENIED', 'only the session owner can change roles');
    const target = this.all.get(targetClientId);
    if (!target) throw new TetherError('NOT_FOUND', `no client ${targetClientId} is attached to session ${this.s.sessionId}`);
    if (target.role === 'owner') throw new TetherError('FAILED_PRECONDITION', 'an owner attachment keeps its role');
    if (role === 'controller' && !mayControl(targetClientId))
      throw new TetherError('PERMISSION_DENIED', `${target.member.principal}'s token does not allow control`);
    const principal = target.member.principal;
    const own = principal === this.s.roles.owner;
    const changed = [...this.all.values()].filter(
      (a) =>
        (own ? a === target : a.member.principal === principal) &&
        a.role !== 'owner' &&
        a.role !== role &&
        (role === 'viewer' || mayControl(a.member.clientId)),
    );
    const recorded = changed.length ? changed : !own && this.s.roles.decided(principal) !== role ? [target] : [];
    // Recorded before it takes effect: a change that cannot be audited is not made.
    for (const a of recorded)
      this.s.audit.record(by.member.principal, 'role_change', { client_id: a.member.clientId, target_principal: principal, role });
    if (!own) this.s.roles.decide(principal, role);
    for (const a of changed) {
      a.role = role;
      this.announce('role_changed', principal, a.member.clientId, role, undefined, a.member.name);
    }
  }

  /**
   * The owner hands the session to `to`: an attached member's principal, or one `known` says
   * the gateway knows (else NOT_FOUND). Audited before it takes effect; then the old owner's
   * owner attachments become controllers and the new owner's controller attachments owners
   * (viewers stay viewers), each change shown to all. Returns the previous owner.
   */
  handOver(byClientId: string, to: string, known: (principal: string) => boolean): string {
    const by = this.attached(byClientId);
    if (by.role !== 'owner') throw new TetherError('PERMISSION_DENIED', 'only the session owner can hand it over');
    const from = this.s.roles.owner;
    if (to === from) throw new TetherError('FAILED_PRECONDITION', `${to} already owns session ${this.s.sessionId}`);
    const member = [...this.all.values()].some((a) => a.member.principal === to);
    if (!member && !known(to))
      throw new TetherError('NOT_FOUND', `${to} is neither a member of session ${this.s.sessionId} nor a principal this gateway knows`);
    this.s.audit.record(by.member.principal, 'owner_change', { previous_owner: from, owner: to });
    this.s.roles.setOwner(to);
    for (const a of this.all.values()) {
      const role =
        a.role === 'owner' && a.member.principal === from
          ? 'controller'
          : a.role === 'controller' && a.member.principal === to
            ? 'owner'
            : undefined;
      if (!role) continue;
      a.role = role;
      this.announce('role_changed', a.member.principal, a.member.clientId, role, undefined, a.member.name);
    }
    return from;
  }

  private announce(
    action: 'attached' | 'detached' | 'role_changed',
    principal: string,
    clientId: string,
    role: Role,
    mayControl?: boolean,
    name?: string,
  ): void {
    this.presence.add({
      action,
      principal,
      client_id: clientId,
      role,
      ...(mayControl === undefined ? {} : { may_control: mayControl }),
      ...(name === undefined ? {} : { name }),
    });
  }
}
