import { TetherError } from '../../core/errors.js';

/** A permission rule as the engine writes it in `updatedPermissions`. */
interface EngineRule {
  toolName: string;
  ruleContent?: string;
}

const isRule = (r: unknown): r is EngineRule =>
  typeof (r as EngineRule)?.toolName === 'string' && ((r as EngineRule).ruleContent === undefined || typeof (r as EngineRule).ruleContent === 'string');

/** `Bash(echo a *)`, or the bare tool name: as the engine lists a rule (list_permission_rules). */
const labelOf = (r: EngineRule) => (r.ruleContent ? `${r.toolName}(${r.ruleContent})` : r.toolName);

/**
 * The allow rules a session's members granted for the session (answers' `addRules`,
 * destination `session`), with who granted each, and the ones withdrawn since. The engine
 * keeps a session rule until an answer removes it, and only an answer to a prompt may
 * (`removeRules`, engine-protocol.md §5.3), so a withdrawal works in two steps, both seen
 * with the real CLI: an `ask` rule in the engine's flag settings makes the rule's calls ask
 * at once (ask wins over allow), and the next allow answer carries the `removeRules`; then
 * the ask rule is lifted, since the allow rule itself is gone.
 */
export class StandingRules {
  private readonly granted = new Map<string, { rule: EngineRule; grantedBy: string }>();
  /** Withdrawn, still in the engine until an answer removes them: what the ask list names. */
  private readonly withdrawn = new Map<string, EngineRule>();

  /** Records the session rules an allow answer granted. */
  granting(principal: string, updates: unknown): void {
    if (!Array.isArray(updates)) return;
    for (const u of updates) {
      if (u?.type !== 'addRules' || u.behavior !== 'allow' || u.destination !== 'session' || !Array.isArray(u.rules)) continue;
      for (const rule of u.rules.filter(isRule)) {
        const label = labelOf(rule);
        this.granted.set(label, { rule, grantedBy: principal });
        this.withdrawn.delete(label); // granted again: the answer that grants it is the one that counts
      }
    }
  }

  /**
   * Withdraws a rule: only the session's owner or the member who granted it may. Returns the
   * `ask` rules the engine's flag settings must hold now.
   */
  withdraw(label: string, by: string, isOwner: boolean): string[] {
    const g = this.check(label, by, isOwner);
    this.granted.delete(label);
    this.withdrawn.set(label, g.rule);
    return [...this.withdrawn.keys()];
  }

  /** Throws unless `by` may withdraw the rule `label` (NOT_FOUND, PERMISSION_DENIED). */
  check(label: string, by: string, isOwner: boolean): { rule: EngineRule; grantedBy: string } {
    const g = this.granted.get(label);
    if (!g) throw new TetherError('NOT_FOUND', `no rule ${JSON.stringify(label.slice(0, 200))} stands for this session`);
    if (!isOwner && g.grantedBy !== by) throw new TetherError('PERMISSION_DENIED', `only the session owner or ${g.grantedBy}, who granted it, may withdraw ${label}`);
    return g;
  }

  /** Whether a withdrawn rule waits for an answer to remove it from the engine. */
  get removing(): boolean {
    return this.withdrawn.size > 0;
  }

  /**
   * An allow answer's `updatedPermissions` with the withdrawn rules removed from the engine
   * (a rule this same answer grants again stays). Clears the withdrawn list: the ask rules
   * can go once the engine has this answer.
   */
  removeWithdrawn(updates: unknown): unknown[] {
    const list = Array.isArray(updates) ? [...updates] : [];
    const regranted = new Set<string>();
    for (const u of list) if (u?.type === 'addRules' && Array.isArray(u.rules)) for (const r of u.rules.filter(isRule)) regranted.add(labelOf(r));
    const rules = [...this.withdrawn].filter(([label]) => !regranted.has(label)).map(([, rule]) => rule);
    this.withdrawn.clear();
    return rules.length ? [...list, { type: 'removeRules', rules, behavior: 'allow', destination: 'session' }] : list;
  }
}
