import { z } from 'zod';
import { entryTokens, type UsageEntry } from '../protocol/usage.js';
import { GROUP_PREFIX } from '../protocol/turn-names.js';
import type { Groups } from './turn-approval.js';

/**
 * Budgets of the policy file (`budgets:`), pure: which budgets a prompt falls under, what was
 * spent against each in its window, and when a window resets. Windows are UTC: a day runs
 * from 00:00 UTC, a month from the 1st at 00:00 UTC. The gateway's ledger supplies the turns
 * (gateway/usage/).
 */

/** The share of a budget at which its person is warned, unless the budget says otherwise. */
export const DEFAULT_BUDGET_WARN = 0.8;

/**
 * One budget. `who`: whose turns count and whom it stops: `*` each principal on their own,
 * a principal, or `group:NAME` (the policy's group, its members' turns together); absent:
 * everyone's turns together. `agent`: only turns on (and prompts to) that agent. `per`: the
 * window (`session`: the session the prompt goes to, for its whole life). At least one of
 * `usd` and `tokens` (every token the engine counted: input, output, cache read and written).
 */
export const Budget = z
  .object({
    who: z
      .string()
      .min(1)
      .max(256)
      .refine((w) => !w.startsWith(GROUP_PREFIX) || w.length > GROUP_PREFIX.length, 'group: needs a group name')
      .optional(),
    agent: z.string().min(1).max(128).optional(),
    per: z.enum(['day', 'month', 'session']),
    usd: z.number().positive().optional(),
    tokens: z.number().int().positive().optional(),
    /** Warn the person once spending crosses this share of the budget (0 < warn < 1; default 0.8). */
    warn: z.number().gt(0).lt(1).optional(),
  })
  .strict()
  .refine((b) => b.usd !== undefined || b.tokens !== undefined, 'a budget needs usd or tokens (or both)');
export type Budget = z.infer<typeof Budget>;

/** Where a prompt would go, and whose it is. */
export interface BudgetSubject {
  principal: string;
  agent: string;
  sessionId: string;
}

/** One budget's standing for a subject: what counts, what was spent, when it resets. */
export interface BudgetStanding {
  budget: Budget;
  /** The budget as the policy file says it, e.g. `budgets[0] (who: *, per: day, usd: 5)`. */
  name: string;
  spentUsd: number;
  spentTokens: number;
  /** Start of the window (epoch ms; 0 for per: session). */
  sinceMs: number;
  /** When the window resets (epoch ms); undefined for per: session (it never does). */
  resetsAtMs: number | undefined;
}

/** The window of `per` that holds `nowMs`: its start and its reset (UTC calendar). */
export function budgetWindow(per: Budget['per'], nowMs: number): { sinceMs: number; resetsAtMs: number | undefined } {
  if (per === 'session') return { sinceMs: 0, resetsAtMs: undefined };
  const d = new Date(nowMs);
  const [y, m, day] = [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()];
  if (per === 'day') return { sinceMs: Date.UTC(y, m, day), resetsAtMs: Date.UTC(y, m, day + 1) };
  return { sinceMs: Date.UTC(y, m, 1), resetsAtMs: Date.UTC(y, m + 1, 1) };
}

/** Whether the budget stops `subject`'s prompts (its `who` and `agent` take them in). */
export function budgetApplies(b: Budget, s: BudgetSubject, groups: Groups): boolean {
  if (b.agent !== undefined && b.agent !== s.agent) return false;
  return b.who === undefined || b.who === '*' || whoCounts(b.who, s.principal, groups);
}

function whoCounts(who: string, principal: string, groups: Groups): boolean {
  if (who.startsWith(GROUP_PREFIX)) return (groups[who.slice(GROUP_PREFIX.length)] ?? []).includes(principal);
  return who === principal;
}

/** Whether a booked turn counts against the budget as it stands for `subject`. */
function counts(b: Budget, s: BudgetSubject, e: UsageEntry, groups: Groups): boolean {
  if (b.agent !== undefined && e.agent !== b.agent) return false;
  if (b.per === 'session' && e.session_id !== s.sessionId) return false;
  if (b.who === undefined) return true;
  if (b.who === '*') return e.principal === s.principal;
  return whoCounts(b.who, e.principal, groups);
}

/** A budget named as the policy file says it. */
export function budgetName(b: Budget, index: number): string {
  const parts = [
    b.who === undefined ? undefined : `who: ${b.who}`,
    b.agent === undefined ? undefined : `agent: ${b.agent}`,
    `per: ${b.per}`,
    b.usd === undefined ? undefined : `usd: ${b.usd}`,
    b.tokens === undefined ? undefined : `tokens: ${b.tokens}`,
  ];
  return `budgets[${index}] (${parts.filter(Boolean).join(', ')})`;
}

/**
 * Every budget that applies to `subject`, with what was spent against it in its window now.
 * `turnsSince(ms)`: the ledger's turns that ended at or after `ms`, oldest first.
 */
export function budgetStandings(
  budgets: readonly Budget[],
  subject: BudgetSubject,
  groups: Groups,
  nowMs: number,
  turnsSince: (sinceMs: number) => Iterable<UsageEntry>,
): BudgetStanding[] {
  const out: BudgetStanding[] = [];
  budgets.forEach((budget, i) => {
    if (!budgetApplies(budget, subject, groups)) return;
    const { sinceMs, resetsAtMs } = budgetWindow(budget.per, nowMs);
    let spentUsd = 0;
    let spentTokens = 0;
    for (const e of turnsSince(sinceMs)) {
      if (!counts(budget, subject, e, groups)) continue;
      spentUsd += e.cost_usd;
      spentTokens += entryTokens(e);
    }
    out.push({ budget, name: budgetName(budget, i), spentUsd, spentTokens, sinceMs, resetsAtMs });
  });
  return out;
}

/** The share of its budget a standing has used: the larger of its usd and tokens shares. */
export function budgetShare(s: Pick<BudgetStanding, 'budget' | 'spentUsd' | 'spentTokens'>): number {
  const usd = s.budget.usd === undefined ? 0 : s.spentUsd / s.budget.usd;
  const tokens = s.budget.tokens === undefined ? 0 : s.spentTokens / s.budget.tokens;
  return Math.max(usd, tokens);
}

/** When a standing's window resets, in words: `at 2026-12-03T00:00:00.000Z`, or never for a session budget. */
export function resetText(s: Pick<BudgetStanding, 'resetsAtMs'>): string {
  return s.resetsAtMs === undefined
    ? 'it does not reset: it counts the whole session (start a new one)'
    : `it resets at ${new Date(s.resetsAtMs).toISOString()}`;
}

/** What was spent of a budget, in words: `$5.0100 of $5` / `210000 of 200000 tokens`. */
export function spentText(s: Pick<BudgetStanding, 'budget' | 'spentUsd' | 'spentTokens'>): string {
  const parts: string[] = [];
  if (s.budget.usd !== undefined) parts.push(`$${s.spentUsd.toFixed(4)} of $${s.budget.usd}`);
  if (s.budget.tokens !== undefined) parts.push(`${s.spentTokens} of ${s.budget.tokens} tokens`);
  return parts.join(', ');
}

/** Throws-free check of a policy's budgets against its groups: the first problem, or undefined. */
export function budgetGroupProblem(budgets: readonly Budget[], groups: Groups): string | undefined {
  for (const [i, b] of budgets.entries()) {
    if (b.who?.startsWith(GROUP_PREFIX) && !Object.hasOwn(groups, b.who.slice(GROUP_PREFIX.length)))
      return `budgets[${i}].who ${JSON.stringify(b.who)} names no group of the policy's groups (${Object.keys(groups).join(', ') || 'none defined'})`;
  }
  return undefined;
}
