import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TetherError } from '../core/errors.js';
import type { EngineKind, SessionOptions } from '../core/protocol/session-options.js';
import { engineFlag, flagToken } from '../core/engine-flags.js';
import { ENGINE_DEFAULT_MODE, optionFlags } from '../core/engine-choices.js';
import { checkArgValue, checkFlagUse, type EngineFlagPolicy } from './extra-args.js';

/** The flags every engine gets: stream-json both ways, permission asks over stdio. */
export const STREAM_JSON_FLAGS = [
  '-p',
  '--input-format',
  'stream-json',
  '--output-format',
  'stream-json',
  '--verbose',
  '--permission-prompt-tool',
  'stdio',
];

export type EngineChoice = EngineKind | 'auto';

export interface ResolvedEngines {
  /** Engines this agent can run, default first. */
  engines: EngineKind[];
  defaultEngine: EngineKind;
  /** Executable for the real CLI, when available. */
  claudeCommand?: string;
  /** Why `auto` chose what it chose, for the start-up banner. */
  explanation: string;
}

/** Finds an executable on PATH (or checks an explicit path). */
export function findExecutable(command: string, pathEnv = process.env.PATH ?? ''): string | undefined {
  const candidates = command.includes('/')
    ? [command]
    : pathEnv
        .split(delimiter)
        .filter(Boolean)
        .map((d) => join(d, command));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/**
 * Decides which engines the agent offers. `auto` takes the real CLI when it is on PATH (or
 * at --engine-command) and the built-in demo engine otherwise; `claude` insists on the CLI.
 */
export function resolveEngines(choice: EngineChoice, engineCommand = process.env.TETHER_ENGINE_COMMAND ?? 'claude'): ResolvedEngines {
  const claude = findExecutable(engineCommand);
  if (choice === 'demo') return { engines: ['demo'], defaultEngine: 'demo', explanation: 'demo engine (chosen with --engine demo)' };
  if (choice === 'claude') {
    if (!claude)
      throw new TetherError(
        'FAILED_PRECONDITION',
        `engine "claude" requested but "${engineCommand}" is not an executable on PATH (set --engine-command or TETHER_ENGINE_COMMAND)`,
      );
    return { engines: ['claude', 'demo'], defaultEngine: 'claude', claudeCommand: claude, explanation: `claude (${claude})` };
  }
  if (claude)
    return {
      engines: ['claude', 'demo'],
      defaultEngine: 'claude',
      claudeCommand: claude,
      explanation: `claude (${claude}), found on PATH`,
    };
  return {
    engines: ['demo'],
    defaultEngine: 'demo',
    explanation: `demo engine ("${engineCommand}" not found on PATH; install Claude Code or pass --engine-command to use the real CLI)`,
  };
}

/** The demo engine's entry point, relative to agent/ (source and dist alike). */
export const DEMO_ENGINE_SCRIPT = 'demo-engine/main.js';

/** Path of the compiled demo engine script, beside this module. */
export function demoEnginePath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const js = join(here, DEMO_ENGINE_SCRIPT);
  if (existsSync(js)) return js;
  // Running from source (tests): use the compiled copy in dist/.
  const dist = join(here, '..', 'dist', 'agent', DEMO_ENGINE_SCRIPT);
  if (existsSync(dist)) return dist;
  throw new TetherError('FAILED_PRECONDITION', 'demo engine not built: run `npm run build`');
}

/**
 * The flags that map one-to-one from session options, each value glued to its flag
 * (`--flag=value`: never a token of its own, so never read as another flag, not even by the
 * CLI's raw argv scans; see core/engine-flags.ts). Values checked as argv strings; a
 * bypassPermissions mode only when the policy allows it.
 */
export function optionArgs(o: SessionOptions, policy: EngineFlagPolicy = {}, agent?: string): string[] {
  return optionFlags(o).map(({ name, value }) => {
    const flag = engineFlag(name)!;
    checkFlagUse(flag, value, policy, agent ?? 'this agent');
    if (value !== undefined) checkArgValue(name, value);
    return flagToken(flag, value);
  });
}

/**
 * `--permission-mode default` unless the session chose a mode: some CLI releases
 * (2.1.285–2.1.301) start in `auto` and would run tools without ever asking, so no prompt
 * would reach a Tether client (docs/compatibility.md).
 */
export function defaultModeArgs(o: SessionOptions, extraArgs: string[]): string[] {
  const chosen = o.permission_mode !== undefined || extraArgs.some((a) => a === '--permission-mode' || a.startsWith('--permission-mode='));
  return chosen ? [] : ['--permission-mode', ENGINE_DEFAULT_MODE];
}

/**
 * The command line for one session's engine: the agent's plumbing, the session options and
 * the extra arguments already checked by {@link checkExtraArgs} (with the same policy).
 */
export function engineCommandLine(
  kind: EngineKind,
  engines: ResolvedEngines,
  o: SessionOptions,
  extraArgs: string[] = [],
  policy: EngineFlagPolicy = {},
  agent?: string,
): { command: string; args: string[] } {
  const args = [...STREAM_JSON_FLAGS, ...defaultModeArgs(o, extraArgs), ...optionArgs(o, policy, agent), ...extraArgs];
  if (kind === 'demo') return { command: process.execPath, args: [demoEnginePath(), ...args] };
  if (!engines.claudeCommand) throw new TetherError('FAILED_PRECONDITION', 'this agent has no claude engine');
  return { command: engines.claudeCommand, args };
}
