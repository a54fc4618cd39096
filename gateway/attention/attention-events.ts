import { createHash } from 'node:crypto';
import type { AttentionEvent, AttentionType, MayAnswer } from '../../core/protocol/attention.js';
import type { Session, SessionNotice } from '../session/session.js';
import type { BudgetNotice } from '../usage/usage-desk.js';

/** Roles that may answer a prompt when the turn's approval names nobody in particular. */
const ANSWERING_ROLES = ['owner', 'controller'] as const;

/** The longest summary an event carries (it is shown on a lock screen). */
const MAX_SUMMARY_CHARS = 120;

/** One event and the people it is for, each with whether they may answer it. */
export interface Attention {
  event: AttentionEvent;
  recipients: Recipient[];
}

export interface Recipient {
  principal: string;
  /** May answer the prompt (push offers Allow/Deny); false for everything that is not a prompt. */
  mayAnswer: boolean;
  /** The person has a tab attached to this session: they see it there, so nothing is sent to them. */
  present: boolean;
}

/**
 * The stable id of one occurrence: the same prompt (or turn end, ending, loss) derived again
 * yields the same id, so deliveries and retries of it are recognised as one.
 */
export function attentionId(type: AttentionType, sessionId: string, key: string): string {
  return createHash('sha256').update(`${type}\n${sessionId}\n${key}`).digest('base64url').slice(0, 22);
}

/**
 * Derives the attention event of a session's notice (undefined for notices that need no one:
 * a prompt settling), with its recipients: for a prompt, who may answer it (the principals the
 * turn's approval names, else the owner and every attached controller); for the rest, the owner
 * and the session's `followers` (session.follow). Presence decides `present`: a principal with
 * a client attached to the session sees it there,
 * unless `hidden` says their page reported its tab out of sight.
 */
export function deriveAttention(
  session: Session,
  n: SessionNotice,
  hidden: (principal: string) => boolean = () => false,
  now = new Date(),
  followers: readonly string[] = [],
): Attention | undefined {
  if (n.kind === 'prompt_settled') return undefined;
  const clients = session.info().clients;
  // Present: a client attached, unless the person's page said its tab is out of sight.
  const present = new Set(clients.map((c) => c.principal).filter((p) => !hidden(p)));
  const base = { session_id: session.id, agent: session.agent, at: now.toISOString() };
  const owner = session.owner;
  const ownerAndFollowers = (event: AttentionEvent): Attention => ({
    event,
    recipients: unique([owner, ...followers]).map((principal) => ({ principal, mayAnswer: false, present: present.has(principal) })),
  });
  switch (n.kind) {
    case 'prompt': {
      const type: AttentionType = n.interactive ? 'question' : 'permission_request';
      const controllers = clients.filter((c) => c.role === 'owner' || c.role === 'controller').map((c) => c.principal);
      const may: MayAnswer = n.mayAnswer
        ? { principals: [...n.mayAnswer], roles: [] }
        : { principals: unique([owner, ...controllers]), roles: [...ANSWERING_ROLES] };
      const event: AttentionEvent = {
        id: attentionId(type, session.id, n.requestId),
        type,
        ...base,
        request_id: n.requestId,
        tool: n.tool,
        may_answer: may,
        summary: short(n.interactive ? `${session.agent} asks you a question` : `${session.agent} asks to use ${n.tool}`),
      };
      return { event, recipients: may.principals.map((p) => ({ principal: p, mayAnswer: true, present: present.has(p) })) };
    }
    case 'turn_complete':
      return ownerAndFollowers({
        id: attentionId('turn_complete', session.id, String(n.seq)),
        type: 'turn_complete',
        ...base,
        summary: short(`${session.agent}: the turn finished${n.subtype && n.subtype !== 'success' ? ` (${n.subtype})` : ''}`),
      });
    case 'ended':
      return ownerAndFollowers({
        id: attentionId('session_ended', session.id, 'end'),
        type: 'session_ended',
        ...base,
        summary: short(`${session.agent}: the session ended`),
      });
    case 'agent_lost':
      return ownerAndFollowers({
        id: attentionId('agent_lost', session.id, String(n.seq)),
        type: 'agent_lost',
        ...base,
        summary: short(`the agent ${session.agent} is away; the session waits for it`),
      });
  }
}

/**
 * A turn took `notice.principal` past a budget's warning share or its end (gateway/usage/): for
 * them alone, unless their tab on the session shows it already. One id per budget, state and
 * window, so a second turn in the same window past the same mark is not told again.
 */
export function budgetAttention(
  session: Session,
  notice: BudgetNotice,
  hidden: (principal: string) => boolean = () => false,
  now = new Date(),
): Attention {
  const present = session.info().clients.some((c) => c.principal === notice.principal && !hidden(c.principal));
  const key = `${notice.principal}\n${notice.budget}\n${notice.state}\n${notice.resets_at ?? ''}`;
  return {
    event: {
      id: attentionId('budget', session.id, key),
      type: 'budget',
      session_id: session.id,
      agent: session.agent,
      at: now.toISOString(),
      summary: short(notice.message),
    },
    recipients: [{ principal: notice.principal, mayAnswer: false, present }],
  };
}

function unique(xs: string[]): string[] {
  return [...new Set(xs)];
}

function short(text: string): string {
  return text.length <= MAX_SUMMARY_CHARS ? text : `${text.slice(0, MAX_SUMMARY_CHARS - 1)}…`;
}
