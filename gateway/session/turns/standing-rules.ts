import { TetherError } from '../../../core/errors.js';
import { parseRule, RuleError, type Rule, type ToolCall } from '../../../core/policy/rules.js';

/** A permission rule as the engine writes it in `updatedPermissions`. */
interface EngineRule {
  toolName: string;
  ruleContent?: string;
}

const isRule = (r: unknown): r is EngineRule =>
  typeof (r as EngineRule)?.toolName === 'string' &&
  ((r as EngineRule).ruleContent === undefined || typeof (r as EngineRule).ruleContent === 'string');

/** `Bash(echo a *)`, or the bare tool name: as the engine lists a rule (list_permission_rules). */
const labelOf = (r: EngineRule) => (r.ruleContent ? `${r.toolName}(${r.ruleContent})` : r.toolName);

/** Whether a permission update is an allow rule kept for the session: what "allow for this session" grants. */
const isSessionAllow = (u: unknown): u is { rules: unknown[] } =>
  (u as { type?: unknown })?.type === 'addRules' &&
  (u as { behavior?: unknown }).behavior === 'allow' &&
  (u as { destination?: unknown }).destination === 'session' &&
  Array.isArray((u as { rules?: unknown }).rules);

/** An answer's permission updates as the engine gets them: without session allow rules, which the gateway keeps per person. */
export function engineUpdates(updates: unknown[]): unknown[] {
  return updates.filter((u) => !isSessionAllow(u));
}

/** One rule that stands for the session. */
export interface StandingRule {
  label: string;
  grantedBy: string;
  /** Everyone's turns (a rule the owner granted), or only its grantor's. */
  forEveryone: boolean;
  /** The rule as Claude Code's rules match (core/policy/rules.ts); undefined when it cannot be read there, so it never answers. */
  matcher: Rule | undefined;
}

/**
 * The allow rules a session's members granted "for this session", kept by the gateway per
 * person (issue 31): the engine's session rules are engine-wide, so an allow answer's session
 * `addRules` never reach the engine. When the engine asks about a call, the gateway answers it
 * itself if a rule stands for the turn's author: one its author granted, or one the owner granted
 * (for everyone). The engine asks again for every call no rule covers, and a withdrawn rule
 * simply stops answering.
 */
export class StandingRules {
  private readonly granted = new Map<string, StandingRule>();

  /** Records the session allow rules of an answer `principal` gave (`forEveryone`: the owner's). */
  granting(principal: string, updates: unknown, forEveryone: boolean): void {
    if (!Array.isArray(updates)) return;
    for (const u of updates.filter(isSessionAllow)) {
      for (const rule of u.rules.filter(isRule)) {
        const label = labelOf(rule);
        this.granted.set(label, { label, grantedBy: principal, forEveryone, matcher: matcherOf(label) });
      }
    }
  }

  /**
   * The standing rule that allows `call` in a turn by `authors`: it matches as an allow rule,
   * stands for every author (its grantor's own turn, or the owner's rule for everyone), and
   * `mayApprove` says its grantor may approve calls of this turn. Undefined: people decide.
   */
  allowing(call: ToolCall, authors: readonly string[], mayApprove: (grantor: string) => boolean): StandingRule | undefined {
    for (const r of this.granted.values()) {
      const forTurn = r.forEveryone || (authors.length > 0 && authors.every((a) => a === r.grantedBy));
      if (
        forTurn &&
        (exactCommand(r, call) || (r.matcher?.matches(call, 'allow') && !redirectPastWildcard(r, call))) &&
        mayApprove(r.grantedBy)
      )
        return r;
    }
    return undefined;
  }

  /** Withdraws a rule (throws unless {@link check} allows it): calls it covered ask people again at once. */
  withdraw(label: string, by: string, isOwner: boolean): void {
    this.check(label, by, isOwner);
    this.granted.delete(label);
  }

  /** Throws unless `by` may withdraw the rule `label` (NOT_FOUND, PERMISSION_DENIED): the owner, or who granted it. */
  check(label: string, by: string, isOwner: boolean): StandingRule {
    const g = this.granted.get(label);
    if (!g) throw new TetherError('NOT_FOUND', `no rule ${JSON.stringify(label.slice(0, 200))} stands for this session`);
    if (!isOwner && g.grantedBy !== by)
      throw new TetherError('PERMISSION_DENIED', `only the session owner or ${g.grantedBy}, who granted it, may withdraw ${label}`);
    return g;
  }
}

/**
 * A Bash command that may write through a redirect (`>` anywhere in it, quoted or not: the
 * cautious reading) under a wildcard rule: the engine asks about those whatever the rule (seen
 * with the real CLI: `echo one >> log.txt` under `Bash(echo one *)`), so the gateway does not
 * answer them either (an exact rule, the command as written, does: {@link exactCommand}).
 */
function redirectPastWildcard(r: StandingRule, call: ToolCall): boolean {
  return r.matcher?.tool === 'Bash' && (r.matcher.specifier ?? '*').includes('*') && String(call.input.command ?? '').includes('>');
}

/** A Bash rule without a wildcard that is the command exactly as written (redirects and all): it grants that very command. */
function exactCommand(r: StandingRule, call: ToolCall): boolean {
  return (
    r.matcher?.tool === 'Bash' &&
    r.matcher.specifier !== undefined &&
    !r.matcher.specifier.includes('*') &&
    call.tool === 'Bash' &&
    call.input.command === r.matcher.specifier
  );
}

function matcherOf(label: string): Rule | undefined {
  try {
    return parseRule(label);
  } catch (err) {
    if (err instanceof RuleError) return undefined;
    throw err;
  }
}
