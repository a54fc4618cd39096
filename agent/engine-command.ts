import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TetherError } from '../core/errors.js';
import type { EngineKind, SessionOptions } from '../core/protocol/session-options.js';
import { engineFlag, flagToken } from '../core/engine-flags.js';
import { ENGINE_DEFAULT_MODE, optionFlags } from '../core/engine-choices.js';
import { checkArgValue, checkFlagUse, type EngineFlagPolicy } from './extra-args.js';
import { ACP_PRESETS, isAcpKind, splitCommandLine, type AcpPreset } from './acp-engine/presets.js';

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
  /** The command line of each ACP engine (`acp` and the presets), its first word found on PATH. */
  acpCommands?: Partial<Record<EngineKind, string[]>>;
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
 * Decides which engines the agent offers, in the order given (the first is the default; the
 * demo engine is always offered too). `auto` takes the real CLI when it is on PATH (or at
 * --engine-command) and the built-in demo engine otherwise; `claude` insists on the CLI;
 * `acp` runs `engineCommand` as an ACP agent; a preset (opencode, gemini, codex, claude-acp)
 * runs its known command line. Throws FAILED_PRECONDITION naming what is missing.
 */
export function resolveEngines(choice: EngineChoice | readonly EngineChoice[], engineCommand?: string): ResolvedEngines {
  const choices = typeof choice === 'string' ? [choice] : choice.length === 0 ? (['auto'] as const) : choice;
  const acpCommand = choices.includes('acp') ? engineCommand : undefined;
  const claudeCommand = acpCommand === undefined ? (engineCommand ?? process.env.TETHER_ENGINE_COMMAND ?? 'claude') : 'claude';
  const claude = findExecutable(claudeCommand);
  const engines: EngineKind[] = [];
  const acpCommands: Partial<Record<EngineKind, string[]>> = {};
  const why: string[] = [];
  let usesClaude = false;
  for (const c of choices) {
    if (c === 'demo') why.push('demo engine (chosen with --engine demo)');
    else if (c === 'auto' && !claude)
      why.push(`demo engine ("${claudeCommand}" not found on PATH; install Claude Code or pass --engine-command to use the real CLI)`);
    else if (c === 'claude' || c === 'auto') {
      if (!claude)
        throw new TetherError(
          'FAILED_PRECONDITION',
          `engine "claude" requested but "${claudeCommand}" is not an executable on PATH (set --engine-command or TETHER_ENGINE_COMMAND)`,
        );
      usesClaude = true;
      why.push(c === 'auto' ? `claude (${claude}), found on PATH` : `claude (${claude})`);
    } else {
      const words = acpWords(c, acpCommand);
      acpCommands[c] = words;
      why.push(`${c} over ACP (${words.join(' ')})`);
    }
    const kind: EngineKind = c === 'auto' ? (claude ? 'claude' : 'demo') : c;
    if (!engines.includes(kind)) engines.push(kind);
  }
  if (!engines.includes('demo')) engines.push('demo');
  return { engines, defaultEngine: engines[0]!, claudeCommand: usesClaude ? claude : undefined, acpCommands, explanation: why.join('; ') };
}

/** An ACP engine's command line, its program found on PATH (or checked at the path given). */
function acpWords(kind: EngineKind, acpCommand: string | undefined): string[] {
  if (kind === 'acp' && acpCommand === undefined)
    throw new TetherError(
      'FAILED_PRECONDITION',
      'engine "acp" needs the agent\'s command line: --engine-command "opencode acp" (or use a preset: opencode, gemini, codex, claude-acp)',
    );
  const words = kind === 'acp' ? splitCommandLine(acpCommand!) : [...ACP_PRESETS[kind as AcpPreset]];
  const program = findExecutable(words[0]!);
  if (!program)
    throw new TetherError(
      'FAILED_PRECONDITION',
      `engine "${kind}" needs "${words[0]}" on PATH (README, "Other agents", says how to install it)`,
    );
  return [program, ...words.slice(1)];
}

/** The ACP engine's entry point, relative to agent/ (source and dist alike). */
export const ACP_ENGINE_SCRIPT = 'acp-engine/main.js';

/** The demo engine's entry point, relative to agent/ (source and dist alike). */
export const DEMO_ENGINE_SCRIPT = 'demo-engine/main.js';

/** Path of the compiled demo engine script, beside this module. */
export function demoEnginePath(): string {
  return builtScript(DEMO_ENGINE_SCRIPT, 'demo engine');
}

/** A script of ours beside this module, or (running from source: tests) its compiled copy in dist/. */
function builtScript(script: string, what: string): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const js = join(here, script);
  if (existsSync(js)) return js;
  const dist = join(here, '..', 'dist', 'agent', script);
  if (existsSync(dist)) return dist;
  throw new TetherError('FAILED_PRECONDITION', `${what} not built: run \`npm run build\``);
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
  if (isAcpKind(kind)) {
    const words = engines.acpCommands?.[kind];
    if (!words) throw new TetherError('FAILED_PRECONDITION', `this agent has no ${kind} engine`);
    return { command: process.execPath, args: [builtScript(ACP_ENGINE_SCRIPT, 'ACP engine'), JSON.stringify(words), ...args] };
  }
  if (!engines.claudeCommand) throw new TetherError('FAILED_PRECONDITION', 'this agent has no claude engine');
  return { command: engines.claudeCommand, args };
}
