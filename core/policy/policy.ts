import { posix } from 'node:path';
import { z } from 'zod';
import { TetherError } from '../errors.js';
import { PermissionMode } from '../protocol/session-options.js';
import { TurnApproval } from '../protocol/turn-approval.js';
import { parseRule, RuleError, type Rule, type RuleKind, type ToolCall } from './rules.js';
import { approvalText, atLeastAsStrict, checkGroups, type Groups } from './turn-approval.js';
import { Budget, budgetGroupProblem } from './budgets.js';

/**
 * The central policy, as the gateway loads it from `--policy FILE`: Claude Code's
 * `permissions` lists plus Tether's own keys. Pure: parsing, checking and deciding; loading
 * and reloading live in gateway/policy/policy-source.ts.
 */

/** Permission modes from least to most permissive; a ceiling allows its own mode and those before it. */
export const MODE_ORDER = ['plan', 'dontAsk', 'default', 'manual', 'acceptEdits', 'auto', 'bypassPermissions'] as const;
export type Mode = (typeof MODE_ORDER)[number];

/** Who a ceiling applies to: a token scope, a role in the session, or everyone. */
export const CEILING_KEYS = ['*', 'view', 'create', 'control', 'admin', 'owner', 'controller', 'viewer'] as const;

const ruleList = z.array(z.string().min(1).max(4096)).max(10_000).default([]);

/** The file's shape (JSON or YAML). Unknown keys are refused: a key we ignored would look enforced. */
export const PolicyFile = z
  .object({
    permissions: z.object({ deny: ruleList, ask: ruleList, allow: ruleList }).strict().prefault({}),
    /** Highest permission mode per scope/role (a client gets the highest of the keys it holds). */
    maxPermissionMode: z.partialRecord(z.enum(CEILING_KEYS), PermissionMode).optional(),
    /** Models sessions may use (exact names, "*" wildcards); the first is used when a session names none. */
    models: z.array(z.string().min(1).max(256)).min(1).max(1000).optional(),
    /** Per agent name ("*": every agent): absolute folders sessions must work in or under. */
    workingFolders: z.record(z.string().min(1).max(128), z.array(z.string().min(1).max(4096)).min(1)).optional(),
    /** Who approves tool calls in a turn whose author is not the owner (core/policy/turn-approval.ts); default anyController. */
    turnApproval: TurnApproval.optional(),
    /** Per agent name: its sessions' turnApproval instead of the gateway-wide one. */
    turnApprovalByAgent: z.record(z.string().min(1).max(128), TurnApproval).optional(),
    /** Named groups of principals, for `group:NAME` in approvers. */
    groups: z.record(z.string().min(1).max(128), z.array(z.string().min(1).max(256)).max(10_000)).optional(),
    /** Spending caps the gateway enforces before a prompt reaches the engine (core/policy/budgets.ts). */
    budgets: z.array(Budget).max(1000).optional(),
  })
  .strict();
export type PolicyFile = z.infer<typeof PolicyFile>;

/** One tool call's outcome: the first matching rule in the order deny, ask, (mode), allow. */
export interface ToolDecision {
  /** `none`: no rule applies; the engine decides (its mode, its own rules, a prompt to people). */
  decision: RuleKind | 'none';
  rule?: string;
}

/** Who is asking for a mode: the token's scopes and the role in the session. */
export interface Asker {
  canCreate: boolean;
  canControl: boolean;
  canAdmin: boolean;
  role?: 'owner' | 'controller' | 'viewer';
}

/** A checked, compiled policy. */
export class Policy {
  private constructor(
    readonly source: PolicyFile,
    private readonly rules: Record<RuleKind, Rule[]>,
  ) {}

  /** No rules, no limits: what a gateway without `--policy` enforces. */
  static readonly EMPTY = Policy.compile({ permissions: { deny: [], ask: [], allow: [] } });

  /** Checks and compiles a parsed file; throws INVALID_ARGUMENT naming the key, the rule and why. */
  static compile(value: unknown, where = 'policy'): Policy {
    const parsed = PolicyFile.safeParse(value);
    if (!parsed.success) {
      const i = parsed.error.issues[0];
      throw new TetherError('INVALID_ARGUMENT', `${where}: ${i.path.join('.') || '(top level)'}: ${i.message}`);
    }
    const file = parsed.data;
    const rules = { deny: [], ask: [], allow: [] } as Record<RuleKind, Rule[]>;
    for (const kind of ['deny', 'ask', 'allow'] as const) {
      file.permissions[kind].forEach((text, n) => {
        try {
          rules[kind].push(parseRule(text));
        } catch (err) {
          if (!(err instanceof RuleError)) throw err;
          throw new TetherError('INVALID_ARGUMENT', `${where}: permissions.${kind}[${n}] ${JSON.stringify(text)}: ${err.message}`);
        }
      });
    }
    for (const [agent, roots] of Object.entries(file.workingFolders ?? {})) {
      roots.forEach((root, n) => {
        if (!root.startsWith('/'))
          throw new TetherError(
            'INVALID_ARGUMENT',
            `${where}: workingFolders.${agent}[${n}] ${JSON.stringify(root)}: must be an absolute path`,
          );
      });
    }
    if (file.turnApproval) checkGroups(file.turnApproval, file.groups ?? {}, `${where}: turnApproval`);
    for (const [agent, a] of Object.entries(file.turnApprovalByAgent ?? {}))
      checkGroups(a, file.groups ?? {}, `${where}: turnApprovalByAgent.${agent}`);
    const budgetProblem = budgetGroupProblem(file.budgets ?? [], file.groups ?? {});
    if (budgetProblem) throw new TetherError('INVALID_ARGUMENT', `${where}: ${budgetProblem}`);
    return new Policy(file, rules);
  }

  /** The policy's groups (for `group:NAME` approvers). */
  get groups(): Groups {
    return this.source.groups ?? {};
  }

  /** The policy's budgets, in file order (none: no caps). */
  get budgets(): readonly Budget[] {
    return this.source.budgets ?? [];
  }

  /** Who approves calls in others' turns on this agent's sessions, with the key that says so. */
  turnApprovalFor(agent: string): { setting: TurnApproval; rule: string } {
    const own = this.source.turnApprovalByAgent?.[agent];
    if (own) return { setting: own, rule: `turnApprovalByAgent.${agent} = ${approvalText(own)}` };
    const all = this.source.turnApproval ?? 'anyController';
    return { setting: all, rule: `turnApproval = ${approvalText(all)}` };
  }

  /**
   * Throws PERMISSION_DENIED naming the rule when a session asks for a turnApproval that lets
   * someone approve whom the policy's would not (a session may only be stricter), and
   * INVALID_ARGUMENT when it names a group the policy does not define.
   */
  checkTurnApproval(agent: string, asked: TurnApproval | undefined): void {
    if (asked === undefined) return;
    checkGroups(asked, this.groups, 'turn_approval');
    const floor = this.turnApprovalFor(agent);
    if (atLeastAsStrict(asked, floor.setting, this.groups)) return;
    throw new TetherError(
      'PERMISSION_DENIED',
      `turn approval "${approvalText(asked)}" is less strict than the policy's (policy rule: ${floor.rule}); a session may only ask for a stricter one (anyController < approvers < owner)`,
    );
  }

  /**
   * The policy's answer for one tool call, in Claude Code's order: deny rules, then ask rules,
   * then the permission mode (bypassPermissions lets everything not denied or asked through,
   * and plan mode stops what it stops, so allow rules are not consulted in either), then allow
   * rules.
   */
  decide(call: ToolCall, permissionMode: string | undefined): ToolDecision {
    for (const kind of ['deny', 'ask'] as const) {
      const rule = this.rules[kind].find((r) => r.matches(call, kind));
      if (rule) return { decision: kind, rule: rule.text };
    }
    if (permissionMode === 'bypassPermissions' || permissionMode === 'plan') return { decision: 'none' };
    const allow = this.rules.allow.find((r) => r.matches(call, 'allow'));
    return allow ? { decision: 'allow', rule: allow.text } : { decision: 'none' };
  }

  /** The highest mode this asker may set, with the key that gave it; undefined: no ceiling. */
  ceilingFor(asker: Asker): { mode: Mode; key: string } | undefined {
    const table = this.source.maxPermissionMode;
    if (!table) return undefined;
    const held: string[] = ['*', 'view'];
    if (asker.canCreate) held.push('create');
    if (asker.canControl) held.push('control');
    if (asker.canAdmin) held.push('admin');
    if (asker.role) held.push(asker.role);
    let best: { mode: Mode; key: string } | undefined;
    for (const key of held) {
      const mode = table[key as keyof typeof table] as Mode | undefined;
      if (mode && (!best || MODE_ORDER.indexOf(mode) > MODE_ORDER.indexOf(best.mode))) best = { mode, key };
    }
    return best;
  }

  /**
   * Throws INVALID_ARGUMENT for a name that is not a permission mode (it has no place under a
   * ceiling, so it cannot be judged), PERMISSION_DENIED naming the rule when `mode` is above
   * the asker's ceiling.
   */
  checkMode(mode: string, asker: Asker): void {
    if (!(MODE_ORDER as readonly string[]).includes(mode)) {
      throw new TetherError(
        'INVALID_ARGUMENT',
        `${JSON.stringify(mode.slice(0, 64))} is not a permission mode (one of ${MODE_ORDER.join(', ')})`,
      );
    }
    if (!this.source.maxPermissionMode) return;
    const ceiling = this.ceilingFor(asker);
    const above = !ceiling || MODE_ORDER.indexOf(mode as Mode) > MODE_ORDER.indexOf(ceiling.mode);
    if (!above) return;
    const rule = ceiling
      ? `maxPermissionMode.${ceiling.key} = ${ceiling.mode}`
      : `maxPermissionMode has no key for this client (${Object.keys(this.source.maxPermissionMode).join(', ')})`;
    throw new TetherError(
      'PERMISSION_DENIED',
      `permission mode ${mode} is above what the policy allows this client (policy rule: ${rule})`,
    );
  }

  /** Throws PERMISSION_DENIED naming the rule when the model is not on the list. */
  checkModel(model: string | null | undefined): void {
    const list = this.source.models;
    if (!list || model === undefined) return;
    if (model !== null && model !== 'default' && list.some((m) => globMatch(m, model))) return;
    throw new TetherError(
      'PERMISSION_DENIED',
      `model ${JSON.stringify(model)} is not allowed by the policy (policy rule: models = ${list.join(', ')})`,
    );
  }

  /** The model a session gets when it names none: the first on the list (undefined: the engine's default). */
  get defaultModel(): string | undefined {
    const first = this.source.models?.[0];
    return first && !first.includes('*') ? first : undefined;
  }

  /** The folders sessions on this agent must stay in, with the rule that says so; undefined: anywhere. */
  rootsFor(agent: string): { rule: string; folders: string[] } | undefined {
    const table = this.source.workingFolders;
    const key = table?.[agent] ? agent : table?.['*'] ? '*' : undefined;
    if (!table || !key) return undefined;
    return { rule: `workingFolders.${key} = ${table[key].join(', ')}`, folders: table[key] };
  }

  /** Throws PERMISSION_DENIED naming the rule unless `cwd` is inside the agent's roots. */
  checkFolder(agent: string, cwd: string | undefined): void {
    const r = this.rootsFor(agent);
    if (!r) return;
    const { rule, folders: roots } = r;
    if (cwd === undefined || !cwd.startsWith('/')) {
      throw new TetherError(
        'PERMISSION_DENIED',
        `sessions on agent "${agent}" must name an absolute working folder (cwd) inside the policy's roots (policy rule: ${rule})`,
      );
    }
    const real = posix.normalize(cwd);
    if (roots.some((r) => real === posix.normalize(r) || real.startsWith(posix.normalize(r).replace(/\/$/, '') + '/'))) return;
    throw new TetherError(
      'PERMISSION_DENIED',
      `working folder ${cwd} is outside the folders the policy allows on agent "${agent}" (policy rule: ${rule})`,
    );
  }
}

function globMatch(pattern: string, value: string): boolean {
  if (!pattern.includes('*')) return pattern === value;
  return new RegExp(
    `^${pattern
      .split('*')
      .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  ).test(value);
}
