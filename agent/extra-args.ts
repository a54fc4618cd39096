import { TetherError } from '../core/errors.js';

/**
 * CLI flags a client may pass through `extra_args` (the drop-in forwards what the SDK
 * passes), with how many values each takes. Anything else is refused by the agent: flags
 * that would change where the engine's I/O goes, or skip permission prompts, never pass.
 */
export const EXTRA_ARG_ALLOW_LIST: Record<string, 0 | 1> = {
  '--model': 1,
  '--fallback-model': 1,
  '--permission-mode': 1,
  '--allowedTools': 1,
  '--allowed-tools': 1,
  '--disallowedTools': 1,
  '--disallowed-tools': 1,
  '--tools': 1,
  '--max-turns': 1,
  '--max-budget-usd': 1,
  '--max-thinking-tokens': 1,
  '--effort': 1,
  '--system-prompt': 1,
  '--append-system-prompt': 1,
  '--json-schema': 1,
  '--agents': 1,
  '--mcp-config': 1,
  '--strict-mcp-config': 0,
  '--setting-sources': 1,
  '--add-dir': 1,
  '--resume': 1,
  '--session-id': 1,
  '--fork-session': 0,
  '--continue': 0,
  '--include-partial-messages': 0,
  '--replay-user-messages': 0,
  '--include-hook-events': 0,
  '--no-session-persistence': 0,
  '--betas': 1,
  // Also passed by the TypeScript SDK (thinking, taskBudget, agent, resumeSessionAt,
  // permissionPrompts options). `--permission-prompts none` only ever denies: the drop-in
  // uses it when the app has no canUseTool, as a local CLI without a prompt tool would.
  '--thinking': 1,
  '--thinking-display': 1,
  '--task-budget': 1,
  '--agent': 1,
  '--resume-session-at': 1,
  '--permission-prompts': 1,
};

/** Flags the agent always sets itself; a client passing them again is harmless and dropped. */
const OWN_FLAGS = new Set(['-p', '--print', '--verbose', '--input-format', '--output-format', '--permission-prompt-tool']);
const OWN_WITH_VALUE = new Set(['--input-format', '--output-format', '--permission-prompt-tool']);

/**
 * Checks client-supplied engine arguments against the allow list and returns the ones to
 * append. Accepts `--flag value` and `--flag=value`. Throws INVALID_ARGUMENT naming the
 * first refused argument.
 */
export function checkExtraArgs(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const raw = args[i];
    const eq = raw.startsWith('--') ? raw.indexOf('=') : -1;
    const flag = eq > 0 ? raw.slice(0, eq) : raw;
    if (OWN_FLAGS.has(flag)) {
      if (eq < 0 && OWN_WITH_VALUE.has(flag)) i++;
      continue;
    }
    const arity = EXTRA_ARG_ALLOW_LIST[flag];
    if (arity === undefined) throw new TetherError('INVALID_ARGUMENT', `engine argument "${flag}" is not allowed by this agent`);
    if (arity === 0) {
      if (eq > 0) throw new TetherError('INVALID_ARGUMENT', `engine flag "${flag}" takes no value`);
      out.push(flag);
      continue;
    }
    if (eq > 0) {
      out.push(flag, raw.slice(eq + 1));
      continue;
    }
    if (i + 1 >= args.length) throw new TetherError('INVALID_ARGUMENT', `engine flag "${flag}" needs a value`);
    out.push(flag, args[++i]);
  }
  return out;
}
