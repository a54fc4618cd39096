import { TetherError } from '../core/errors.js';
import { CLASS_WORDS, engineFlag, flagClassOf, flagToken, isUnknownToken, readEngineArgv, type EngineFlag } from '../core/engine-flags.js';

/**
 * What a session may ask of its engine beyond the safe flags: the agent owner's choice
 * (`tether agent --allow-engine-flag FLAG --allow-bypass-permissions`), never the client's.
 */
export interface EngineFlagPolicy {
  /** Canonical names of flags sessions may use although they run programs, load code or widen file access. */
  allowFlags?: readonly string[];
  /** Sessions may run tools without asking (`bypassPermissions`, `--dangerously-skip-permissions`). */
  allowBypassPermissions?: boolean;
}

/** Linux's cap on one argv string (MAX_ARG_STRLEN, 32 pages, counting the NUL): longer fails exec. */
export const MAX_ENGINE_ARG_BYTES = 128 * 1024 - 1;

/**
 * Throws PERMISSION_DENIED, naming the flag, when the policy does not let a session use this
 * flag with this value. Returns false for the agent's own plumbing (dropped), true otherwise.
 */
export function checkFlagUse(flag: EngineFlag, value: string | undefined, policy: EngineFlagPolicy, agent: string): boolean {
  const cls = flagClassOf(flag, value);
  if (cls === 'plumbing') return false;
  if (cls === 'safe') return true;
  if (cls === 'bypasses-permissions') {
    if (policy.allowBypassPermissions) return true;
    const what = flag.name === '--permission-mode' ? `engine flag "${flag.name}" with "bypassPermissions"` : `engine flag "${flag.name}"`;
    throw new TetherError(
      'PERMISSION_DENIED',
      `${what} is not allowed by agent "${agent}" (${CLASS_WORDS[cls]}); its owner can allow it with --allow-bypass-permissions`,
    );
  }
  if (policy.allowFlags?.includes(flag.name)) return true;
  throw new TetherError(
    'PERMISSION_DENIED',
    `engine flag "${flag.name}" is not allowed by agent "${agent}" (${CLASS_WORDS[cls]}); its owner can allow it with --allow-engine-flag ${flag.name}`,
  );
}

/** Throws INVALID_ARGUMENT when a value cannot be one argv string (NUL, or past the kernel's cap). */
export function checkArgValue(flag: string, value: string): void {
  if (value.includes('\0')) throw new TetherError('INVALID_ARGUMENT', `the value of engine flag "${flag}" contains a NUL character`);
  if (Buffer.byteLength(value) + flag.length + 1 > MAX_ENGINE_ARG_BYTES) {
    throw new TetherError(
      'INVALID_ARGUMENT',
      `the value of engine flag "${flag}" is longer than one command-line argument may be (${MAX_ENGINE_ARG_BYTES} bytes)`,
    );
  }
}

/**
 * Reads client-supplied engine arguments with the CLI's own arity and returns them as argv
 * tokens in which no value can be read as a flag (`--flag=value`, canonical names); the
 * agent's own plumbing flags are dropped. Unknown flags, stray values and misused flags are
 * INVALID_ARGUMENT; flags the policy does not allow are PERMISSION_DENIED. Both name the flag.
 */
export function checkExtraArgs(args: readonly string[], policy: EngineFlagPolicy = {}, agent = 'this agent'): string[] {
  const out: string[] = [];
  for (const item of readEngineArgv(args)) {
    if (isUnknownToken(item)) {
      const name = item.flag?.name ?? (item.token.startsWith('--') ? item.token.split('=')[0] : item.token.slice(0, 64));
      const why =
        item.problem === 'unknown'
          ? 'is not a flag this agent knows'
          : item.problem === 'positional'
            ? 'is not a flag (values go with their flag)'
            : item.problem === 'needs-value'
              ? 'needs a value'
              : 'takes no value';
      throw new TetherError('INVALID_ARGUMENT', `engine argument "${name}" ${why}`);
    }
    if (!checkFlagUse(item.flag, item.value, policy, agent)) continue;
    if (item.value !== undefined) checkArgValue(item.flag.name, item.value);
    out.push(flagToken(item.flag, item.value));
  }
  return out;
}

/**
 * Checks an owner's `--allow-engine-flag` entry: a known flag whose use needs allowing.
 * Returns a problem to report, or undefined when the entry is fine.
 */
export function allowFlagProblem(name: string): string | undefined {
  const flag = engineFlag(name);
  if (!flag) return `"${name}" is not a flag of the engine's command line (core/engine-flags.ts lists them)`;
  if (flag.name !== name) return `use the flag's canonical name ${flag.name}`;
  if (flag.class === 'bypasses-permissions')
    return `"${name}" skips permission prompts: use allowBypassPermissions (--allow-bypass-permissions) instead`;
  if (flag.class === 'safe' || flag.class === 'plumbing')
    return `"${name}" is always allowed (or set by the agent itself); nothing to allow`;
  return undefined;
}
