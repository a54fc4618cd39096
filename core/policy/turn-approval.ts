import { TetherError } from '../errors.js';
import type { TurnApproval } from '../protocol/turn-approval.js';
import { GROUP_PREFIX, turnName } from '../protocol/turn-names.js';

export { turnName };

/**
 * Whose approval a tool call needs, from the turn that caused it (issue 31): pure decisions
 * over a {@link TurnApproval} setting, the session's owner and the turn's authors. The gateway
 * applies them where the engine asks (gateway/session/turns/session-prompts.ts).
 */

/** The policy file's groups: a name to the principals in it. */
export type Groups = Readonly<Record<string, readonly string[]>>;

/** anyController < approvers < owner: fewer people may approve as the setting rises. */
const RANK = { anyController: 0, approvers: 1, owner: 2 } as const;

export type ApprovalKind = keyof typeof RANK;

export function approvalKind(a: TurnApproval): ApprovalKind {
  return typeof a === 'string' ? a : 'approvers';
}

/** The setting as written in the policy file or on the command line. */
export function approvalText(a: TurnApproval): string {
  return typeof a === 'string' ? a : `approvers: ${a.approvers.join(', ')}`;
}

/** Whether `principal` is one of `entries` (a name, or a member of a `group:NAME` entry). */
function listed(entries: readonly string[], principal: string, groups: Groups): boolean {
  return entries.some((e) =>
    e.startsWith(GROUP_PREFIX) ? (groups[e.slice(GROUP_PREFIX.length)] ?? []).includes(principal) : e === principal,
  );
}

/** Throws INVALID_ARGUMENT naming an approvers entry that names a group the policy does not define. */
export function checkGroups(a: TurnApproval, groups: Groups, where: string): void {
  if (typeof a === 'string') return;
  for (const e of a.approvers) {
    if (e.startsWith(GROUP_PREFIX) && !Object.hasOwn(groups, e.slice(GROUP_PREFIX.length))) {
      throw new TetherError(
        'INVALID_ARGUMENT',
        `${where}: approvers entry ${JSON.stringify(e)} names no group of the policy's groups (${Object.keys(groups).join(', ') || 'none defined'})`,
      );
    }
  }
}

/**
 * Whether `asked` lets no one approve whom `floor` would not: a higher kind, or approvers each of
 * whom the floor lists too (a name it lists or a member of a group it lists; a group only when
 * the floor lists that very group).
 */
export function atLeastAsStrict(asked: TurnApproval, floor: TurnApproval, groups: Groups): boolean {
  const [a, f] = [approvalKind(asked), approvalKind(floor)];
  if (RANK[a] !== RANK[f]) return RANK[a] > RANK[f];
  if (typeof asked === 'string' || typeof floor === 'string') return true;
  return asked.approvers.every((e) => floor.approvers.includes(e) || (!e.startsWith(GROUP_PREFIX) && listed(floor.approvers, e, groups)));
}

/** The setting in force: the session's own when it is at least as strict as the policy's, else the policy's. */
export function effectiveApproval(policy: TurnApproval, session: TurnApproval | undefined, groups: Groups): TurnApproval {
  return session !== undefined && atLeastAsStrict(session, policy, groups) ? session : policy;
}

/** The turn a tool call comes from: the session's owner and the principals whose prompts started or joined the turn. */
export interface TurnContext {
  owner: string;
  /** Empty: the turn's author is not known here (treated as someone else's turn: fail closed). */
  authors: readonly string[];
}

/** Approval someone other than the turn's author must give, with who may give it. */
export interface ApprovalNeed {
  kind: 'owner' | 'approvers';
  /** Who may answer, as shown to members: the owner, then the approvers entries (not the turn's authors). */
  mayAnswer: string[];
}

/** The approval a call of this turn needs beyond "any controller"; undefined when any controller may answer. */
export function approvalNeeded(setting: TurnApproval, turn: TurnContext): ApprovalNeed | undefined {
  if (setting === 'anyController') return undefined;
  if (turn.authors.length > 0 && turn.authors.every((a) => a === turn.owner)) return undefined;
  if (setting === 'owner') return { kind: 'owner', mayAnswer: [turn.owner] };
  return { kind: 'approvers', mayAnswer: [turn.owner, ...setting.approvers.filter((e) => e !== turn.owner && !turn.authors.includes(e))] };
}

/**
 * Why `principal` may not answer a call that needs `need`, or undefined when they may: the
 * owner always may; an approver may unless the call comes from their own turn.
 */
export function approvalRefusal(
  need: ApprovalNeed,
  setting: TurnApproval,
  principal: string,
  turn: TurnContext,
  groups: Groups,
): string | undefined {
  if (principal === turn.owner) return undefined;
  if (
    need.kind === 'approvers' &&
    typeof setting !== 'string' &&
    listed(setting.approvers, principal, groups) &&
    !turn.authors.includes(principal)
  )
    return undefined;
  const from = `this call comes from ${turnName(turn.authors, principal)}`;
  if (need.kind === 'owner') return `needs the owner's approval: ${from} (the owner is ${turn.owner})`;
  return `needs the approval of the owner (${turn.owner}) or of an approver (${need.mayAnswer.slice(1).join(', ') || "none but the turn's authors"}): ${from}`;
}
