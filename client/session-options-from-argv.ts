import { isUnknownToken, readEngineArgv } from '../core/engine-flags.js';
import { TetherError } from '../core/errors.js';
import { SessionOptions } from '../core/protocol/session-options.js';

/** Flags with a SessionOptions field of their own (arity: core/engine-flags.ts). */
const MAPPED: Record<string, (o: SessionOptions, value: string) => boolean> = {
  '--model': (o, v) => set(o, 'model', v),
  '--permission-mode': (o, v) => set(o, 'permission_mode', v),
  '--allowedTools': (o, v) => set(o, 'allowed_tools', [...(o.allowed_tools ?? []), ...toolList(v)]),
  '--disallowedTools': (o, v) => set(o, 'disallowed_tools', [...(o.disallowed_tools ?? []), ...toolList(v)]),
  '--resume': (o, v) => set(o, 'resume', v),
  '--system-prompt': (o, v) => set(o, 'system_prompt', v),
  '--append-system-prompt': (o, v) => set(o, 'append_system_prompt', v),
  '--include-partial-messages': (o) => set(o, 'include_partial_messages', true),
};

/**
 * Flags dropped here besides the agent's own plumbing: the debug flags only make the CLI
 * write diagnostics into a file or stderr on the agent's machine, where a client must not
 * choose file paths.
 */
const DROPPED = new Set(['--debug', '--debug-file', '--debug-to-stderr']);

/** Sets a field when the value passes the field's own schema. */
function set(o: SessionOptions, key: keyof SessionOptions, value: unknown): boolean {
  const parsed = SessionOptions.shape[key].safeParse(value);
  if (!parsed.success) return false;
  (o as Record<string, unknown>)[key] = parsed.data;
  return true;
}

function toolList(value: string): string[] {
  return value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
}

/**
 * Turns the argv an SDK passes to `claude` into SessionOptions: the flags with a field of
 * their own become that field (when the value fits the field; otherwise they stay raw), the
 * local-only ones are dropped, and everything else goes verbatim into `extra_args`, which
 * the agent checks against its allow list. Reads argv with the CLI's own arity
 * (core/engine-flags.ts); tokens it does not know pass through verbatim for the agent to judge.
 * Argv without `--permission-prompt-tool` (an app without canUseTool) gets
 * `--permission-prompts none`, so approvals are denied as a local CLI would deny them.
 */
export function sessionOptionsFromArgs(args: readonly string[], cwd?: string): SessionOptions {
  const options: SessionOptions = {};
  const extra: string[] = [];
  let promptRouting = false;
  let lastRaw: string[] | undefined; // a variadic flag's values share one raw group
  for (const item of readEngineArgv(args)) {
    if (isUnknownToken(item)) {
      if (item.problem === 'needs-value') throw new TetherError('INVALID_ARGUMENT', `engine flag "${item.flag!.name}" needs a value`);
      extra.push(item.token);
      continue;
    }
    const { flag, value, raw } = item;
    if (flag.name === '--permission-prompt-tool' || flag.name === '--permission-prompts') promptRouting = true;
    if (flag.class === 'plumbing' || DROPPED.has(flag.name)) continue;
    const apply = MAPPED[flag.name];
    if (apply && (flag.arity === 'none' || value !== undefined) && apply(options, value ?? '')) continue;
    if (raw !== lastRaw) extra.push(...raw); // let the agent judge it
    lastRaw = raw;
  }
  // Without a prompt tool the CLI asks nobody: what needs approval is denied (and the tools
  // that only work with someone to ask are not offered). The agent always routes asks to
  // the gateway, so an SDK app without canUseTool gets the same through this flag.
  if (!promptRouting) extra.push('--permission-prompts', 'none');
  if (cwd) options.cwd = cwd;
  if (extra.length) options.extra_args = extra;
  return options;
}
