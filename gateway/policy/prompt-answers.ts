import { isAbsolute, relative, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { TetherError } from '../../core/errors.js';
import type { Policy } from '../../core/policy/policy.js';
import { PATH_FIELDS } from '../../core/policy/rules.js';

/**
 * What a person's answer to a permission prompt (`can_use_tool`, docs/engine-protocol.md
 * section 6) may carry. The engine applies an answer as it comes: `updatedInput` is the call
 * that then runs, `updatedPermissions` are rules it keeps, in the agent user's settings files
 * when the destination says so (every later session reads them). So an answer is a decision
 * about this one call, not a way around the policy or the owner's settings: its input is
 * judged by the policy as if it were the call, and it may keep a rule only for this session,
 * and only the rule the engine itself proposed or a narrower one.
 */

/** The call a can_use_tool prompt asks about, and the rules the engine proposed with it. */
export interface PromptCall {
  tool: string;
  input: Record<string, unknown>;
  /** The engine's `permission_suggestions` (PermissionUpdate entries), as it sent them. */
  suggestions: Record<string, unknown>[];
  /** A tool whose answer is a person's input by design (AskUserQuestion: the answers are added to it). */
  interactive: boolean;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The call of a can_use_tool request body, or of a hook_callback about a tool (a client's own
 * PreToolUse or PermissionRequest hook, whose answer may change the call too); undefined when
 * it names no tool.
 */
export function promptCallOf(request: Record<string, unknown> | undefined): PromptCall | undefined {
  if (request?.subtype === 'hook_callback' && isObject(request.input))
    return promptCallOf({ ...request.input, subtype: 'can_use_tool', input: request.input.tool_input });
  if (request?.subtype !== 'can_use_tool' || typeof request.tool_name !== 'string') return undefined;
  const suggestions = Array.isArray(request.permission_suggestions) ? request.permission_suggestions.filter(isObject) : [];
  const interactive = request.requires_user_interaction === true || request.tool_name === 'AskUserQuestion';
  return { tool: request.tool_name, input: isObject(request.input) ? request.input : {}, suggestions, interactive };
}

/**
 * A hook callback's answer (its output) as the permission answers it amounts to: each
 * `updatedInput` (PreToolUse's, a PermissionRequest decision's, the older top-level one) and
 * a PermissionRequest decision's `updatedPermissions`, each judged as an allow would be.
 */
export function hookAnswerEffects(output: Record<string, unknown>): Record<string, unknown>[] {
  const specific = isObject(output.hookSpecificOutput) ? output.hookSpecificOutput : {};
  const decision = isObject(specific.decision) ? specific.decision : {};
  const inputs = [output.updatedInput, specific.updatedInput, decision.updatedInput].filter((v) => v !== undefined);
  const permissions = [specific.updatedPermissions, decision.updatedPermissions].filter((v) => v !== undefined);
  return [
    ...inputs.map((updatedInput) => ({ behavior: 'allow', updatedInput })),
    ...permissions.map((updatedPermissions) => ({ updatedPermissions })),
  ];
}

/** What a checked answer changes, for the audit record: the input that runs, and the rules kept. */
export interface AnswerEffects {
  /** The input the tool runs with when allowed (the engine's own when the answer sends none). */
  input?: Record<string, unknown>;
  /** Whether that input differs from the one the prompt showed. */
  inputChanged: boolean;
  updatedPermissions?: Record<string, unknown>[];
}

/**
 * Checks one answer (`response.response` of the client's control_response) to the prompt for
 * `call`. Throws PERMISSION_DENIED naming the rule or the entry when the policy denies the
 * updated input (or an ask rule covers a changed one), when a permission update would reach
 * beyond this session or widen what the engine proposed, or when it sets a mode the engine did
 * not propose; INVALID_ARGUMENT when it is malformed. `cwd`: the session's folder, when known.
 */
export function checkAnswer(policy: Policy, call: PromptCall, answer: Record<string, unknown>, cwd: string | undefined): AnswerEffects {
  const effects: AnswerEffects = { inputChanged: false };
  if (answer.behavior === 'allow') {
    const input = answer.updatedInput === undefined ? call.input : answer.updatedInput;
    if (!isObject(input)) throw new TetherError('INVALID_ARGUMENT', 'updatedInput must be an object (the tool input to run)');
    effects.input = input;
    effects.inputChanged = !isDeepStrictEqual(input, call.input);
    // Path rules judge where a path leads, which only the agent sees (the policy hook's call);
    // an answer is judged here, as written, so it may not move the call to another path.
    const moved = PATH_FIELDS.find((f) => !isDeepStrictEqual(input[f], call.input[f]));
    if (moved !== undefined && !call.interactive) {
      throw new TetherError(
        'PERMISSION_DENIED',
        `the answer's updatedInput for ${call.tool} is refused: it changes ${moved}, and only the path the engine asked about was judged where it leads (symlinks); deny it and ask for the call you want; the prompt is still open`,
      );
    }
    const d = policy.decide({ tool: call.tool, input, cwd: cwd ?? '/' }, undefined);
    // An ask rule on the input shown is what this prompt is; on a changed input it would ask people
    // about a call nobody was shown (unless the tool's input is the person's answer: AskUserQuestion).
    if (d.decision === 'deny' || (d.decision === 'ask' && effects.inputChanged && !call.interactive)) {
      throw new TetherError(
        'PERMISSION_DENIED',
        `the answer's updatedInput for ${call.tool} is refused: the policy's ${d.decision} rule covers it (policy rule: ${d.rule}); the prompt is still open`,
      );
    }
  }
  if (answer.updatedPermissions !== undefined) {
    if (!Array.isArray(answer.updatedPermissions))
      throw new TetherError('INVALID_ARGUMENT', 'updatedPermissions must be a list of permission updates');
    effects.updatedPermissions = answer.updatedPermissions.map((u, n) => checkUpdate(u, n, call, cwd));
  }
  return effects;
}

/** One PermissionUpdate of an answer: for this session only, and no wider than the engine proposed. */
function checkUpdate(u: unknown, n: number, call: PromptCall, cwd: string | undefined): Record<string, unknown> {
  const where = `updatedPermissions[${n}]`;
  if (!isObject(u) || typeof u.type !== 'string')
    throw new TetherError('INVALID_ARGUMENT', `${where} must be a permission update with a type`);
  if (u.destination !== 'session') {
    throw new TetherError(
      'PERMISSION_DENIED',
      `${where} is refused: an answer may keep a permission only for this session (destination "session"), not ${JSON.stringify(u.destination)}, which would outlive the session (settings files are read by every later session)`,
    );
  }
  const refuse = (why: string) => new TetherError('PERMISSION_DENIED', `${where} (${u.type}) is refused: ${why}`);
  const proposed = call.suggestions.filter((s) => s.type === u.type);
  switch (u.type) {
    case 'addRules': {
      if (u.behavior === 'deny' || u.behavior === 'ask') return u; // only narrows what runs
      if (u.behavior !== 'allow') throw new TetherError('INVALID_ARGUMENT', `${where} needs behavior allow, deny or ask`);
      const offered = proposed
        .filter((s) => s.behavior === 'allow')
        .flatMap((s) => (Array.isArray(s.rules) ? s.rules.filter(isObject) : []));
      for (const rule of Array.isArray(u.rules) ? u.rules : [undefined]) {
        if (!isObject(rule) || typeof rule.toolName !== 'string')
          throw new TetherError('INVALID_ARGUMENT', `${where} needs rules of {toolName, ruleContent?}`);
        if (!offered.some((o) => o.toolName === rule.toolName && narrows(rule.ruleContent, o.ruleContent))) {
          const shown = offered.map((o) => ruleText(o)).join(', ') || 'none';
          throw refuse(
            `the allow rule ${ruleText(rule)} is not one the engine proposed for this call, nor narrower (it proposed: ${shown})`,
          );
        }
      }
      return u;
    }
    case 'removeDirectories':
      return u; // only narrows
    case 'addDirectories': {
      const dirs = Array.isArray(u.directories) ? u.directories : [];
      for (const dir of dirs) {
        const offered = proposed.some((s) => Array.isArray(s.directories) && s.directories.includes(dir));
        if (typeof dir !== 'string' || !offered || !inside(dir, cwd))
          throw refuse(`the folder ${JSON.stringify(dir)} is not one the engine proposed inside the session's folder`);
      }
      return u;
    }
    case 'setMode':
      if (!proposed.some((s) => s.mode === u.mode)) throw refuse(`the engine did not propose mode ${JSON.stringify(u.mode)}`);
      return u; // the policy's ceiling judges it too (checkAnswerModes)
    default:
      // replaceRules and removeRules could drop rules the session was started with.
      if (proposed.some((s) => isDeepStrictEqual({ ...s, destination: 'session' }, u))) return u;
      throw refuse("only the engine's own proposal may be kept");
  }
}

/** `Tool(content)` as rules are written. */
function ruleText(rule: Record<string, unknown>): string {
  return typeof rule.ruleContent === 'string' && rule.ruleContent !== ''
    ? `${String(rule.toolName)}(${rule.ruleContent})`
    : String(rule.toolName);
}

/**
 * Whether a rule's content matches no more than the proposed one's: the same, or within a
 * proposed prefix (`echo hi *`, legacy `npm run:*`) with its own literal head inside it. A
 * proposed rule without content covers the whole tool; a candidate without content is wider
 * than any proposed content.
 */
function narrows(candidate: unknown, proposed: unknown): boolean {
  if (proposed === undefined || proposed === '') return candidate === undefined || typeof candidate === 'string';
  if (typeof candidate !== 'string' || candidate === '' || typeof proposed !== 'string') return false;
  if (candidate === proposed) return true;
  const prefix = proposed.endsWith(':*') ? proposed.slice(0, -2) : proposed.endsWith('*') ? proposed.slice(0, -1) : undefined;
  if (prefix === undefined || prefix.includes('*')) return false;
  const head = candidate.split('*')[0].replace(/:$/, '');
  return head.startsWith(prefix) && head.length >= prefix.length;
}

function inside(dir: string, cwd: string | undefined): boolean {
  if (cwd === undefined || !isAbsolute(dir)) return false;
  const rel = relative(resolve(cwd), resolve(dir));
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}
