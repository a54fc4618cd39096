import { parseCommand, type ParsedCommand, type SimpleCommand } from './bash-command.js';

/**
 * Permission rules in Claude Code's own syntax and semantics, parsed and matched without any
 * I/O (the gateway's central policy uses them; docs/policy.md lists the forms).
 *
 * ```
 * rule      = TOOL | TOOL "(" SPECIFIER ")"
 * Bash(cmd)           exact command;  Bash(prefix:*)  the command or it followed by a space;
 * Bash(a * b)         "*" matches any run of characters, spaces included; a trailing " *"
 *                     also matches the bare command ("Bash(ls *)" matches "ls" and "ls -la",
 *                     never "lsof"). Matched on the parsed command (./bash-command.ts): each
 *                     simple command it runs, unquoted; deny and ask match when any does (or
 *                     its program's bare name, or the line as sent), allow only when every one
 *                     does as written and the parser judged the whole line.
 * Read(p) / Edit(p)   gitignore-style paths: "//abs/**" absolute, "/p" and "./p" and "a/b"
 *                     from the session's working folder, "name" (no slash) at any depth under it.
 *                     Edit rules cover Edit, Write, MultiEdit and NotebookEdit; Read rules cover
 *                     Read, Grep, Glob and LS.
 * WebFetch(domain:h)  the URL's host is h (or "*.h" for its subdomains).
 * mcp__server         every tool of that MCP server ("mcp__server__*" too); mcp__server__tool one tool.
 * Task(name) / Agent(name)  that subagent type.
 * ```
 */

/** A rule's kind, in the order they are evaluated. */
export type RuleKind = 'deny' | 'ask' | 'allow';

/** One tool call as the engine's PreToolUse hook describes it. */
export interface ToolCall {
  tool: string;
  input: Record<string, unknown>;
  /** The session's working folder (the hook input's `cwd`), absolute. */
  cwd: string;
  /**
   * The folder and the tool's path with symlinks followed (the agent resolves them on its
   * machine): a path rule judges both the written path and this one.
   */
  resolved?: { cwd: string; path?: string };
}

/** A parsed rule: its text and how it matches. */
export interface Rule {
  text: string;
  tool: string;
  /** undefined: every use of the tool. */
  specifier?: string;
  /** For `kind` deny/ask a compound command matches when any part does; for allow, when all do. */
  matches(call: ToolCall, kind: RuleKind): boolean;
}

/** A rule that cannot be used, with why. */
export class RuleError extends Error {}

const TOOL_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;
const EDIT_TOOLS = ['Edit', 'Write', 'MultiEdit', 'NotebookEdit'];
const READ_TOOLS = ['Read', 'Grep', 'Glob', 'LS'];
/** Tools whose rules name a path; a path rule for any other tool is refused (it would never match). */
const PATH_RULE_TOOLS: Record<string, string[]> = { Edit: EDIT_TOOLS, Read: READ_TOOLS };

/** Parses one rule; throws RuleError naming what is wrong. */
export function parseRule(text: string): Rule {
  const m = /^([^()\s]+)(?:\((.*)\))?$/s.exec(text.trim());
  if (!m) throw new RuleError('expected Tool or Tool(specifier)');
  const tool = m[1];
  const spec = m[2];
  if (tool.startsWith('mcp__')) {
    if (spec !== undefined) throw new RuleError('MCP rules take no specifier: write mcp__server or mcp__server__tool');
    return mcpRule(text, tool);
  }
  if (!TOOL_NAME.test(tool)) throw new RuleError(`${JSON.stringify(tool)} is not a tool name`);
  if (spec === undefined || spec === '*') return { text, tool, matches: (call) => call.tool === tool };
  if (spec === '') throw new RuleError('an empty specifier matches nothing: write the tool name alone');
  if (tool === 'Bash') return bashRule(text, spec);
  if (PATH_RULE_TOOLS[tool]) return pathRule(text, tool, spec);
  if (tool === 'WebFetch') return domainRule(text, spec);
  if (tool === 'Task' || tool === 'Agent')
    return {
      text,
      tool,
      specifier: spec,
      matches: (call) => (call.tool === 'Task' || call.tool === 'Agent') && call.input.subagent_type === spec,
    };
  throw new RuleError(
    `${tool}(…) specifiers are not supported (only Bash, Read, Edit, WebFetch(domain:…), Task/Agent take one); docs/policy.md lists the forms`,
  );
}

function mcpRule(text: string, name: string): Rule {
  const parts = name.split('__');
  if (parts.length < 2 || parts.length > 3 || parts.some((p, i) => p === '' && i < 2))
    throw new RuleError('expected mcp__server or mcp__server__tool');
  const server = `mcp__${parts[1]}__`;
  const whole = parts.length === 2 || parts[2] === '*';
  return { text, tool: name, matches: (call) => (whole ? call.tool.startsWith(server) : call.tool === name) };
}

// ---- Bash -------------------------------------------------------------------------------

function bashRule(text: string, spec: string): Rule {
  const matchOne = bashPattern(spec);
  return {
    text,
    tool: 'Bash',
    specifier: spec,
    matches(call, kind) {
      if (call.tool !== 'Bash' || typeof call.input.command !== 'string') return false;
      const c = commandOf(call);
      // allow: only a line the parser fully judged, each command it runs as written.
      if (kind === 'allow') return !c.parsed.unjudgeable && c.own.length > 0 && c.own.every(matchOne);
      // deny/ask: the line as sent, or any command it runs (wrapped ones too), as written or by the program's name alone.
      return matchOne(c.text) || c.forms.some(matchOne);
    },
  };
}

interface BashCall {
  text: string;
  parsed: ParsedCommand;
  /** The line's own simple commands as written (not those guessed out of wrappers). */
  own: string[];
  /** Every simple command as written and by its program's name alone (`/bin/rm`, `~/bin/rm` are rm). */
  forms: string[];
}

/** A call's command, parsed once for all the rules it is matched against. */
const commands = new WeakMap<ToolCall, BashCall>();
function commandOf(call: ToolCall): BashCall {
  let c = commands.get(call);
  if (!c) {
    const text = String(call.input.command).trim();
    const parsed = parseCommand(text);
    const written = (s: SimpleCommand) => s.words.join(' ');
    const forms = parsed.commands.flatMap((s) =>
      s.name !== undefined ? [written(s), [s.name, ...s.words.slice(1)].join(' ')] : [written(s)],
    );
    c = { text, parsed, own: parsed.commands.filter((s) => s.via === undefined).map(written), forms };
    commands.set(call, c);
  }
  return c;
}

/** One simple command against one Bash specifier. */
function bashPattern(spec: string): (command: string) => boolean {
  if (spec.endsWith(':*')) {
    const prefix = spec.slice(0, -2);
    if (prefix.includes('*')) throw new RuleError('the legacy "prefix:*" form takes no other "*"');
    return (c) => c === prefix || c.startsWith(prefix + ' ');
  }
  const stars = spec.split('*').length - 1;
  let source = spec.split('*').map(escapeRegExp).join('.*');
  // "ls *" also matches the bare "ls" (a trailing " *" that is the only wildcard is optional).
  if (stars === 1 && spec.endsWith(' *')) source = `${escapeRegExp(spec.slice(0, -2))}(?: .*)?`;
  const re = new RegExp(`^${source}$`, 's');
  return (c) => re.test(c);
}

// ---- paths ------------------------------------------------------------------------------

function pathRule(text: string, tool: string, spec: string): Rule {
  if (spec.startsWith('~'))
    throw new RuleError(
      '"~/" paths name the home folder of the agent\'s machine, which the gateway does not know: write the absolute path as //home/NAME/…',
    );
  const tools = PATH_RULE_TOOLS[tool];
  const glob = spec.startsWith('//') ? { anchored: 'root' as const, pattern: spec.slice(2) } : anchorOf(spec);
  const re = globToRegExp(glob.pattern);
  return {
    text,
    tool,
    specifier: spec,
    matches(call, kind) {
      if (!tools.includes(call.tool)) return false;
      const p = pathsOf(call);
      if (p === undefined) return false;
      const hits = (w: Where) => w.targets.some((t) => matchesPath(re, glob.anchored, t, w.cwd));
      // deny/ask: the path as written or where it really leads; allow: both (a symlink to
      // somewhere else is not the allowed file).
      if (kind === 'allow') return hits(p.written) && (p.real === undefined || hits(p.real));
      return hits(p.written) || (p.real !== undefined && hits(p.real));
    },
  };
}

/** Paths of one call and the folder relative rules are anchored at. */
interface Where {
  targets: string[];
  cwd: string;
}

/** A file call's normalised targets as written and as resolved, worked out once for all the rules it is matched against. */
const paths = new WeakMap<ToolCall, { written: Where; real?: Where } | undefined>();
function pathsOf(call: ToolCall): { written: Where; real?: Where } | undefined {
  if (paths.has(call)) return paths.get(call);
  const path = toolPath(call);
  let out: { written: Where; real?: Where } | undefined;
  if (path !== undefined) {
    out = { written: where(call.tool, path, call.cwd) };
    const r = call.resolved;
    if (r) out.real = where(call.tool, r.path ?? r.cwd, r.cwd);
  }
  paths.set(call, out);
  return out;
}

function where(tool: string, path: string, cwd: string): Where {
  const abs = normalizePath(path.startsWith('/') ? path : `${cwd}/${path}`);
  // A search (Grep, Glob, LS) in a folder reads what is inside it: a child stands for it too.
  const targets = READ_TOOLS.includes(tool) && tool !== 'Read' ? [abs, `${abs === '/' ? '' : abs}/${SEARCHED_CHILD}`] : [abs];
  return { targets, cwd: normalizePath(cwd) };
}

/** A name no real file has, standing for "anything inside the searched folder". */
const SEARCHED_CHILD = '\u0000';

function matchesPath(re: RegExp, anchored: 'root' | 'cwd' | 'any', abs: string, cwd: string): boolean {
  if (anchored === 'root') return re.test(abs.slice(1));
  if (abs !== cwd && !abs.startsWith(cwd === '/' ? '/' : cwd + '/')) return false;
  const rel = abs.slice(cwd === '/' ? 1 : cwd.length + 1);
  if (anchored === 'cwd') return re.test(rel);
  return rel.split('/').some((_, i, segs) => re.test(segs.slice(i).join('/'))); // any depth
}

/** gitignore anchoring: a leading "/" or "./", or a slash inside, anchors at the working folder. */
function anchorOf(spec: string): { anchored: 'cwd' | 'any'; pattern: string } {
  if (spec.startsWith('./')) return { anchored: 'cwd', pattern: spec.slice(2) };
  if (spec.startsWith('/')) return { anchored: 'cwd', pattern: spec.slice(1) };
  const body = spec.endsWith('/') ? spec.slice(0, -1) : spec;
  return { anchored: body.includes('/') ? 'cwd' : 'any', pattern: spec };
}

/** The input fields that name the path a file tool acts on, the first one set counting. */
export const PATH_FIELDS = ['file_path', 'notebook_path', 'path'] as const;

/** The path a file tool acts on, from its input. */
function toolPath(call: ToolCall): string | undefined {
  const i = call.input;
  const p = PATH_FIELDS.map((f) => i[f]).find((v) => v !== undefined && v !== null);
  if (typeof p === 'string' && p !== '') return p;
  return READ_TOOLS.includes(call.tool) && call.tool !== 'Read' ? call.cwd : undefined; // a search without a path searches the working folder
}

/** Collapses "//", "/./" and "/../" so a path cannot climb out of a rule by spelling. */
export function normalizePath(path: string): string {
  const out: string[] = [];
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  return '/' + out.join('/');
}

/** gitignore glob: "**" any number of folders, "*" and "?" within one name; a trailing "/" its contents. */
function globToRegExp(pattern: string): RegExp {
  let p = pattern.endsWith('/') ? pattern + '**' : pattern;
  p = p.replace(/^\/+/, '');
  let out = '';
  for (let i = 0; i < p.length; i++) {
    const ch = p[i];
    if (ch === '*' && p[i + 1] === '*') {
      const slash = p[i + 2] === '/';
      out += slash ? '(?:.*/)?' : '.*';
      i += slash ? 2 : 1;
    } else if (ch === '*') out += '[^/]*';
    else if (ch === '?') out += '[^/]';
    else out += escapeRegExp(ch);
  }
  // A folder pattern also covers what is inside it ("Edit(/build)" covers build/x).
  return new RegExp(`^${out}(?:/.*)?$`, 's');
}

// ---- WebFetch ---------------------------------------------------------------------------

function domainRule(text: string, spec: string): Rule {
  if (!spec.startsWith('domain:') || spec.length === 'domain:'.length) throw new RuleError('WebFetch rules take domain:HOST');
  const host = spec.slice('domain:'.length).toLowerCase();
  return {
    text,
    tool: 'WebFetch',
    specifier: spec,
    matches(call) {
      if (call.tool !== 'WebFetch' || typeof call.input.url !== 'string') return false;
      let h: string;
      try {
        h = new URL(call.input.url).hostname.toLowerCase();
      } catch {
        return false;
      }
      return host.startsWith('*.') ? h.endsWith(host.slice(1)) : h === host;
    },
  };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
