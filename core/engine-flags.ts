/**
 * The one description of the engine's command line (Claude Code 2.1.332): which flags exist,
 * how many values each takes, and what a flag lets whoever chooses it do on the agent's
 * machine. The agent builds and checks engine argv with it, the SDK drop-in parses the argv
 * the SDK hands it with it, and the demo engine reads its own argv with it.
 *
 * Arity is the CLI's own: `claude --help` (`<v>` value, `[v]` optional value, `<v...>`
 * variadic) and its eager argv scanner for hidden flags. How the CLI reads argv matters:
 *  - commander takes the next token as a required value whatever it looks like, takes it as an
 *    optional value only when it does not begin with `-`, and keeps taking tokens for a
 *    variadic flag until one begins with `-`;
 *  - `--flag=value` gives the known flag everything after the first `=`;
 *  - before commander, the CLI scans the raw argv for some flags (a token `--debug-file=…`
 *    anywhere, or `--debug-file` followed by a token, turns the debug log on), so a value
 *    passed as a token of its own can be read as a flag even when commander would not.
 * Hence {@link flagToken}: every value the agent passes is glued to its flag with `=`.
 * test/engine-flags.test.ts checks every arity here against `claude --help` and against the
 * tables of the CLI's own argv scanner in the installed binary.
 */

/** How many values a flag takes. */
export type FlagArity = 'none' | 'value' | 'optional' | 'variadic';

/**
 * What choosing a flag lets its chooser do on the agent's machine.
 *  - `safe`: shapes the session (model, prompts, tools offered or pre-approved, limits).
 *  - `plumbing`: the stream-json wiring the agent always sets itself; a client's copy is dropped.
 *  - `runs-programs`: makes the engine start a program (an MCP server command, a URL it fetches).
 *  - `loads-code`: loads settings, hooks, plugins or agent definitions (hooks run commands).
 *  - `widens-files`: reads or writes files beyond the session's folder (extra dirs, debug files).
 *  - `bypasses-permissions`: runs tools without asking anyone.
 */
export type FlagClass = 'safe' | 'plumbing' | 'runs-programs' | 'loads-code' | 'widens-files' | 'bypasses-permissions';

export interface EngineFlag {
  /** Canonical long name, e.g. `--model`. */
  name: string;
  arity: FlagArity;
  class: FlagClass;
  /** Other spellings the CLI accepts (`-r`, `--allowed-tools`). */
  aliases?: readonly string[];
}

/**
 * The flags by class and arity. Notes: `--permission-mode bypassPermissions` bypasses
 * permissions and an `--mcp-config` of in-process SDK servers only is safe (flagClassOf);
 * `--setting-sources` chooses which settings files load, so a narrower list drops the owner's
 * own settings (their deny rules and hooks): only the full `user,project,local` is safe; `--agents`
 * definitions may start MCP servers (and with --print it may name a file); `--debug` writes
 * a log on the agent's disk and `--debug-to-stderr` into the stderr tail clients see.
 */
const TABLE: Record<FlagClass, Partial<Record<FlagArity, string>>> = {
  plumbing: {
    none: '--print --verbose',
    value: '--input-format --output-format --permission-prompt-tool',
  },
  safe: {
    none:
      '--strict-mcp-config --continue --fork-session --no-session-persistence --include-partial-messages --replay-user-messages ' +
      '--include-hook-events --forward-subagent-text --exclude-dynamic-system-prompt-sections --disable-slash-commands',
    value:
      '--model --fallback-model --permission-mode --permission-prompts --max-turns --max-budget-usd --max-thinking-tokens ' +
      '--task-budget --effort --thinking --thinking-display --system-prompt --append-system-prompt --json-schema --agent ' +
      '--name --session-id --resume-session-at --resume-drops-turn',
    optional: '--resume',
    variadic: '--allowedTools --disallowedTools --tools --betas',
  },
  'runs-programs': {
    none: '--ide --chrome',
    value: '--plugin-url',
    variadic: '--mcp-config',
  },
  'loads-code': {
    none: '--await-initialize --managed-settings-in-initialize',
    value:
      '--settings --setting-sources --managed-settings --agents --plugin-dir --plugin-dir-no-mcp --project-config-root --initialize-fields',
    variadic: '--channels',
  },
  'widens-files': {
    none: '--debug-to-stderr',
    value: '--system-prompt-file --append-system-prompt-file --debug-file',
    optional: '--worktree --debug',
    variadic: '--add-dir --file',
  },
  'bypasses-permissions': {
    none: '--dangerously-skip-permissions --allow-dangerously-skip-permissions',
  },
};

/** Other spellings the CLI accepts, by canonical name. */
const ALIASES: Record<string, readonly string[]> = {
  '--print': ['-p'],
  '--allowedTools': ['--allowed-tools'],
  '--disallowedTools': ['--disallowed-tools'],
  '--name': ['-n'],
  '--resume': ['-r'],
  '--continue': ['-c'],
  '--worktree': ['-w'],
  '--debug': ['-d'],
  '--debug-to-stderr': ['-d2e'],
};

/** Every flag Tether knows; anything else is refused before it reaches an engine. */
export const ENGINE_FLAGS: readonly EngineFlag[] = Object.entries(TABLE).flatMap(([cls, byArity]) =>
  Object.entries(byArity).flatMap(([arity, names]) =>
    names.split(' ').map((name) => ({ name, arity: arity as FlagArity, class: cls as FlagClass, aliases: ALIASES[name] ?? [] })),
  ),
);

const BY_SPELLING = new Map<string, EngineFlag>();
for (const flag of ENGINE_FLAGS) for (const spelling of [flag.name, ...(flag.aliases ?? [])]) BY_SPELLING.set(spelling, flag);

/** The flag a spelling (`-r`, `--allowed-tools`, `--model`) names, or undefined. */
export function engineFlag(spelling: string): EngineFlag | undefined {
  return BY_SPELLING.get(spelling);
}

/** Whether a token is an option to the CLI's parser (commander: longer than `-`, starts with `-`). */
export const looksLikeFlag = (token: string | undefined): token is string =>
  token !== undefined && token.length > 1 && token.startsWith('-');

/** `--flag=value` (or the bare flag): the one form in which a value can never be read as a flag. */
export function flagToken(flag: EngineFlag, value?: string): string {
  return value === undefined ? flag.name : `${flag.name}=${value}`;
}

/**
 * What one use of a flag allows, given its value: `--permission-mode bypassPermissions`
 * bypasses permissions; an `--mcp-config` whose servers are all in-process SDK servers
 * (`{"type":"sdk"}`, served by the app over the session's own messages; an SDK may declare
 * them this way, while the TypeScript SDK 0.3.332 sends them in its initialize request)
 * starts nothing and is safe.
 */
export function flagClassOf(flag: EngineFlag, value: string | undefined): FlagClass {
  if (flag.name === '--permission-mode' && value === 'bypassPermissions') return 'bypasses-permissions';
  if (flag.name === '--mcp-config' && value !== undefined && onlySdkServers(value)) return 'safe';
  if (flag.name === '--setting-sources' && value !== undefined && ALL_SETTING_SOURCES.every((s) => value.split(',').includes(s)))
    return 'safe';
  return flag.class;
}

/** The settings files the CLI loads by default; `--setting-sources` naming all of them drops none. */
const ALL_SETTING_SOURCES = ['user', 'project', 'local'];

/** Whether a JSON `--mcp-config` value declares in-process SDK servers only. */
function onlySdkServers(value: string): boolean {
  try {
    return onlySdkServerMap((JSON.parse(value) as { mcpServers?: unknown })?.mcpServers);
  } catch {
    return false; // not JSON: a file path, which the CLI would read
  }
}

/**
 * Whether a map of MCP server configs (name → config) holds in-process SDK servers only
 * (`{"type":"sdk"}`: served by the app over the session's own messages, so nothing starts).
 */
export function onlySdkServerMap(servers: unknown): boolean {
  if (typeof servers !== 'object' || servers === null || Array.isArray(servers)) return false;
  return Object.values(servers).every((s) => typeof s === 'object' && s !== null && (s as { type?: unknown }).type === 'sdk');
}

/**
 * What each class of flag (and of engine control, core/engine-controls.ts) lets its chooser
 * do, in the words every refusal uses: "… is not allowed by agent "X" (WORDS); its owner …".
 */
export const CLASS_WORDS: Record<Exclude<FlagClass, 'safe' | 'plumbing'>, string> = {
  'runs-programs': 'it makes the engine start a program',
  'loads-code': 'it loads code or settings',
  'widens-files': "it reaches files beyond the session's folder",
  'bypasses-permissions': 'it runs tools without asking anyone',
};

/** One flag use read from argv: the flag, the spelling used, and its values (one per use). */
export interface ParsedFlag {
  flag: EngineFlag;
  spelling: string;
  /** Undefined for `none`, and for `optional` without a value. */
  value?: string;
  /** The argv tokens this use took, verbatim. */
  raw: string[];
}

/** A token the parser could not read as a known flag use. */
export interface UnknownToken {
  /** The token, verbatim (a positional, an unknown flag, `--`). */
  token: string;
  /** Why: `unknown` flag or `positional`; `needs-value` / `takes-no-value` for a known flag used wrongly. */
  problem: 'unknown' | 'positional' | 'needs-value' | 'takes-no-value';
  /** The known flag, when the problem is its value. */
  flag?: EngineFlag;
}

/**
 * Reads argv as the CLI would, one item per flag use (a variadic flag's values are one item
 * each, all with the same `raw`), or an {@link UnknownToken} where the CLI would not read a
 * known flag. Never throws: callers decide what an unknown token means to them.
 */
export function* readEngineArgv(args: readonly string[]): Generator<ParsedFlag | UnknownToken> {
  for (let i = 0; i < args.length; i++) {
    const token = args[i];
    const eq = token.startsWith('--') ? token.indexOf('=') : -1;
    const spelling = eq > 0 ? token.slice(0, eq) : token;
    const flag = looksLikeFlag(token) ? BY_SPELLING.get(spelling) : undefined;
    if (!flag) {
      yield { token, problem: looksLikeFlag(token) || token === '--' ? 'unknown' : 'positional' };
      continue;
    }
    const inline = eq > 0 ? token.slice(eq + 1) : undefined;
    if (flag.arity === 'none') {
      yield inline === undefined ? { flag, spelling, raw: [token] } : { token, problem: 'takes-no-value', flag };
      continue;
    }
    if (inline !== undefined) {
      yield { flag, spelling, value: inline, raw: [token] };
      continue;
    }
    if (flag.arity === 'optional') {
      if (i + 1 < args.length && !looksLikeFlag(args[i + 1])) yield { flag, spelling, value: args[i + 1], raw: [token, args[++i]] };
      else yield { flag, spelling, raw: [token] };
      continue;
    }
    if (i + 1 >= args.length) {
      yield { token, problem: 'needs-value', flag };
      continue;
    }
    // A required value is the next token whatever it looks like; a variadic flag goes on
    // taking tokens until one looks like a flag.
    const values = [args[++i]];
    if (flag.arity === 'variadic') while (i + 1 < args.length && !looksLikeFlag(args[i + 1])) values.push(args[++i]);
    const raw = [token, ...values];
    for (const value of values) yield { flag, spelling, value, raw };
  }
}

/** Type guard for {@link readEngineArgv} items. */
export const isUnknownToken = (item: ParsedFlag | UnknownToken): item is UnknownToken => 'problem' in item;
