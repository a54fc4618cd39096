import { engineFlag, flagToken, isUnknownToken, readEngineArgv } from './engine-flags.js';
import type { SessionOptions } from './protocol/session-options.js';

/**
 * What an engine started for some session options will run with, read from the very argv the
 * agent builds (the flags of the options, then the extra arguments) the way the CLI reads it
 * (core/engine-flags.ts): every use of a flag, `=` forms, and tokens that are another flag's
 * value left as that value. The gateway's policy judges these, never the strings it was sent.
 */

/**
 * The mode the agent starts an engine in when the session names none (agent/engine-command.ts
 * `defaultModeArgs`: some CLI releases would otherwise start in `auto`).
 */
export const ENGINE_DEFAULT_MODE = 'default';

/** The flags that map one-to-one from session options, in the order the agent passes them (before the extra arguments). */
export function optionFlags(o: SessionOptions): Array<{ name: string; value?: string }> {
  const out: Array<{ name: string; value?: string }> = [];
  if (o.model) out.push({ name: '--model', value: o.model });
  if (o.permission_mode) out.push({ name: '--permission-mode', value: o.permission_mode });
  if (o.allowed_tools?.length) out.push({ name: '--allowedTools', value: o.allowed_tools.join(',') });
  if (o.disallowed_tools?.length) out.push({ name: '--disallowedTools', value: o.disallowed_tools.join(',') });
  if (o.resume) out.push({ name: '--resume', value: o.resume });
  if (o.system_prompt !== undefined) out.push({ name: '--system-prompt', value: o.system_prompt });
  if (o.append_system_prompt !== undefined) out.push({ name: '--append-system-prompt', value: o.append_system_prompt });
  if (o.include_partial_messages) out.push({ name: '--include-partial-messages' });
  return out;
}

/**
 * Every value the engine's argv gives each policy-relevant flag, in argv order: the CLI keeps
 * the last use of a single-value flag, so `.at(-1)` is the one in force; the policy judges
 * every use, so a refusal does not rest on which one the CLI keeps.
 */
export interface EngineChoices {
  modes: string[];
  models: string[];
  fallbackModels: string[];
  /** `--dangerously-skip-permissions` or `--allow-dangerously-skip-permissions` is used. */
  skipsPermissions: boolean;
  /** `--settings` values (inline JSON or a file on the agent's machine). */
  settings: string[];
  /** Models named by subagents in `--agents` JSON (a file path names none the gateway can read). */
  agentModels: string[];
}

/**
 * The models subagent definitions name (`--agents` JSON, `initialize.agents`): each is a
 * model the session runs, judged like `--model`. `inherit` (the session's own) is not one.
 */
export function subagentModels(agents: unknown): string[] {
  if (typeof agents !== 'object' || agents === null || Array.isArray(agents)) return [];
  return Object.values(agents).flatMap((d) => {
    const model = typeof d === 'object' && d !== null ? (d as { model?: unknown }).model : undefined;
    if (model === undefined || model === null || model === 'inherit') return [];
    return [typeof model === 'string' ? model : JSON.stringify(model)];
  });
}

function jsonOrUndefined(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}

export function engineChoices(o: SessionOptions): EngineChoices {
  const argv = [...optionFlags(o).map((f) => flagToken(engineFlag(f.name)!, f.value)), ...(o.extra_args ?? [])];
  const c: EngineChoices = { modes: [], models: [], fallbackModels: [], skipsPermissions: false, settings: [], agentModels: [] };
  // Unknown tokens are skipped: the agent refuses them before any engine starts.
  for (const item of readEngineArgv(argv)) {
    if (isUnknownToken(item)) continue;
    const v = item.value;
    switch (item.flag.name) {
      case '--permission-mode':
        if (v !== undefined) c.modes.push(v);
        break;
      case '--model':
        if (v !== undefined) c.models.push(v);
        break;
      case '--fallback-model':
        if (v !== undefined) c.fallbackModels.push(v);
        break;
      case '--settings':
        if (v !== undefined) c.settings.push(v);
        break;
      case '--agents':
        if (v !== undefined) c.agentModels.push(...subagentModels(jsonOrUndefined(v)));
        break;
      case '--dangerously-skip-permissions':
      case '--allow-dangerously-skip-permissions':
        c.skipsPermissions = true;
        break;
      default:
    }
  }
  return c;
}
