import { TetherError } from '../../core/errors.js';
import {
  budgetShare,
  budgetStandings,
  DEFAULT_BUDGET_WARN,
  resetText,
  spentText,
  type BudgetStanding,
  type BudgetSubject,
} from '../../core/policy/budgets.js';
import { entryTokens, type UsageEntry } from '../../core/protocol/usage.js';
import type { PolicyProvider } from '../policy/policy-source.js';
import type { TurnBooking, UsageLedger } from './usage-ledger.js';

/** A budget a turn took past its warning share (`warning`) or to its end (`reached`): told to the person. */
export interface BudgetNotice {
  principal: string;
  session_id: string;
  state: 'warning' | 'reached';
  /** The budget as the policy file says it. */
  budget: string;
  /** Share of the budget used, 0..1+ (the larger of its usd and tokens shares). */
  share: number;
  message: string;
  /** When its window resets (ISO 8601 UTC); absent for a session budget. */
  resets_at?: string;
}

/** What a gateway reports of booked turns to its metrics. */
export interface UsageMetrics {
  turnBooked(entry: UsageEntry): void;
}

/**
 * The usage room's face to sessions: a prompt admitted or refused against the policy's
 * budgets before it reaches the engine, and each ended turn booked in the ledger, with the
 * budgets it took past their warning share or their end. `onNotice` listeners (the attention
 * room: webhooks and push) hear every notice; sessions tell their members.
 */
export class UsageDesk {
  private readonly listeners = new Set<(n: BudgetNotice) => void>();

  constructor(
    readonly ledger: UsageLedger,
    private readonly policy: PolicyProvider,
    private readonly metrics?: UsageMetrics,
    private readonly now: () => number = Date.now,
  ) {}

  /** Adds a listener of every budget notice (e.g. webhooks); returns its removal. */
  onNotice(listener: (n: BudgetNotice) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Throws RESOURCE_EXHAUSTED naming the first budget `subject` has spent (and when it resets)
   * when a prompt of theirs would start a turn over it; a turn under way is never cut.
   */
  admit(subject: BudgetSubject): void {
    const over = this.standings(subject).find((s) => budgetShare(s) >= 1);
    if (!over) return;
    throw new TetherError('RESOURCE_EXHAUSTED', `over budget: ${over.name} is spent (${spentText(over)}); ${resetText(over)}`, {
      budget: over.name,
      ...(over.resetsAtMs === undefined ? {} : { resets_at: new Date(over.resetsAtMs).toISOString() }),
    });
  }

  /** Books the turn a `result` line ends; undefined when the line says nothing countable. */
  turnEnded(line: Uint8Array, who: TurnBooking): { entry: UsageEntry; notices: BudgetNotice[] } | undefined {
    const entry = this.ledger.book(line, who);
    if (!entry) return undefined;
    this.metrics?.turnBooked(entry);
    const notices = this.crossed(entry, { principal: who.principal, agent: who.agent, sessionId: who.sessionId });
    for (const n of notices) for (const l of this.listeners) l(n);
    return { entry, notices };
  }

  private standings(subject: BudgetSubject): BudgetStanding[] {
    const policy = this.policy.current;
    if (!policy.budgets.length) return [];
    return budgetStandings(policy.budgets, subject, policy.groups, this.now(), (ms) => this.ledger.since(ms));
  }

  /** The budgets of the turn's author this turn took past a threshold (warn, or the end). */
  private crossed(entry: UsageEntry, subject: BudgetSubject): BudgetNotice[] {
    const out: BudgetNotice[] = [];
    for (const s of this.standings(subject)) {
      const after = budgetShare(s);
      const before = budgetShare({ ...s, spentUsd: s.spentUsd - entry.cost_usd, spentTokens: s.spentTokens - entryTokens(entry) });
      const warn = s.budget.warn ?? DEFAULT_BUDGET_WARN;
      const state = before < 1 && after >= 1 ? 'reached' : before < warn && after >= warn ? 'warning' : undefined;
      if (!state) continue;
      const resets = s.resetsAtMs === undefined ? undefined : new Date(s.resetsAtMs).toISOString();
      const message =
        state === 'reached'
          ? `budget ${s.name} is spent (${spentText(s)}): the next prompt is refused; ${resetText(s)}`
          : `budget ${s.name} is ${Math.floor(after * 100)}% used (${spentText(s)}); ${resetText(s)}`;
      out.push({
        principal: subject.principal,
        session_id: subject.sessionId,
        state,
        budget: s.name,
        share: after,
        message,
        ...(resets ? { resets_at: resets } : {}),
      });
    }
    return out;
  }
}
