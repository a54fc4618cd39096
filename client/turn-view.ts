import type { TurnAttribution } from '../core/protocol/turn-approval.js';
import { GROUP_PREFIX, turnName } from '../core/protocol/turn-names.js';

/**
 * Whose turn a tool call comes from and whose approval it needs, as people read it: shared by
 * the terminal client and the web page (issue 31).
 */

/** "Bash, in bob's turn", with "; needs the owner's approval (olive)" when not every controller may answer. */
export function promptTurnText(tool: string | undefined, a: TurnAttribution, viewer?: string): string {
  const need = approvalNeedText(a);
  return `${tool ?? 'this call'}, in ${turnName(a.turn_authors, viewer)}${need ? `; ${need}` : ''}`;
}

/** "needs the owner's approval (olive)" / "needs the approval of olive or carol"; undefined when any controller may answer. */
export function approvalNeedText(a: TurnAttribution): string | undefined {
  if (!a.approval) return undefined;
  return a.approval.needs === 'owner'
    ? `needs the owner's approval (${a.approval.may_answer[0]})`
    : `needs the approval of ${a.approval.may_answer.join(' or ')}`;
}

/** Whether `principal` is among those who may answer (a group entry: perhaps, the gateway decides). */
export function mayAnswer(a: TurnAttribution | undefined, principal: string | undefined): boolean {
  if (!a?.approval) return true;
  return a.approval.may_answer.some((e) => e === principal || e.startsWith(GROUP_PREFIX));
}

/** For whom a granted session rule stands, from `prompt_decided.granted_for`: "everyone" or "alice's turns". */
export function grantedForText(grantedFor: unknown, grantedBy: string): string {
  return grantedFor === '*' ? 'everyone' : `${typeof grantedFor === 'string' ? grantedFor : grantedBy}'s turns`;
}

/**
 * An engine's notice to the session's people (`system`/`notice`, e.g. an ACP engine that
 * cannot be resumed after an agent restart), as the terminal and the web page show it.
 */
export function engineNoticeText(m: Record<string, unknown>): string | undefined {
  return m.type === 'system' && m.subtype === 'notice' && typeof m.message === 'string' ? `Note: ${m.message}` : undefined;
}
