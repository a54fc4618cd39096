import { Buffer } from 'node:buffer';
import { createRequire } from 'node:module';
import type { default as Sh, ShNode } from 'mvdan-sh';

/**
 * A Bash tool call's command as bash will run it: parsed with mvdan/sh's bash parser (the one
 * shfmt uses), split into every simple command it runs (lists, pipelines, subshells, blocks,
 * loops, `$(…)`, backticks, `<(…)`, the command strings of `sh -c '…'`, `eval '…'`,
 * `script -c '…'` and `trap '…' SIG`), each word unquoted and unescaped (`$'…'` decoded). What a parse cannot settle marks the command not judgeable,
 * so no allow rule applies to it (docs/policy.md lists what).
 */

export interface SimpleCommand {
  /** The words after unquoting, the program first; a word built by an expansion is kept as written (`$X`). */
  words: string[];
  /** The program's word is a plain literal (no expansion, glob or brace), so whatever runs is that name. */
  literalProgram: boolean;
  /**
   * The program's name (its last path segment) when that much is literal even if the path is
   * not (`~/bin/rm`, `$HOME/bin/rm` run rm): deny and ask rules also see the command by it.
   */
  name?: string;
  /**
   * Set on a command read out of a wrapper's arguments (`sudo rm x` gives `rm x` via sudo):
   * a guess at what the wrapper runs, for deny and ask rules only.
   */
  via?: string;
}

export interface ParsedCommand {
  /** Every simple command the line runs, in source order (nested ones included). */
  commands: SimpleCommand[];
  /** Why an allow rule cannot apply, if anything: a parse error, eval of a variable, a function or alias defined… */
  unjudgeable?: string;
}

/** Programs that run the program named in their arguments (a deny rule also sees that one). */
export const WRAPPERS = new Set([
  'busybox',
  'toybox',
  'sudo',
  'doas',
  'env',
  'command',
  'builtin',
  'exec',
  'nohup',
  'time',
  'nice',
  'ionice',
  'timeout',
  'stdbuf',
  'xargs',
  'setsid',
  'chroot',
  'unbuffer',
  'watch',
  'strace',
  'ltrace',
  'flock',
]);
/** Shells whose `-c STRING` is a command line of its own. */
const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash', 'script']);
/** Nested `sh -c` / `eval` beyond this depth is not judged. */
const MAX_DEPTH = 4;

/** The parser, loaded on first use (a few hundred ms of start-up that only Bash rules need). */
let sh: { parser: ReturnType<(typeof Sh)['syntax']['NewParser']>; syntax: (typeof Sh)['syntax'] } | undefined;
function shell(): NonNullable<typeof sh> {
  if (!sh) {
    const { syntax } = createRequire(import.meta.url)('mvdan-sh') as typeof Sh;
    sh = { parser: syntax.NewParser(), syntax };
  }
  return sh;
}
const NodeType = (node: ShNode) => shell().syntax.NodeType(node);

/** Parses one Bash tool command; never throws (a command bash cannot parse is not judgeable). */
export function parseCommand(command: string, depth = 0): ParsedCommand {
  const src = Buffer.from(command, 'utf8');
  let file: ShNode;
  try {
    // A nested line (sh -c, eval) is parsed while the outer tree is walked: a parser of its own.
    file = (depth === 0 ? shell().parser : shell().syntax.NewParser()).Parse(command, 'command');
  } catch (err) {
    const e = err as { Error?: () => string };
    return {
      commands: [],
      unjudgeable: `it does not parse as bash (${(typeof e.Error === 'function' ? e.Error() : String(err)).slice(0, 200)})`,
    };
  }
  const out: ParsedCommand = { commands: [] };
  const mark = (why: string) => (out.unjudgeable ??= why);
  shell().syntax.Walk(file, (node) => {
    if (!node) return true;
    switch (NodeType(node)) {
      case 'CallExpr': {
        const args = (node.Args as ShNode[]) ?? [];
        if (args.length === 0) return true; // assignments only: their expansions are walked
        const words = args.map((w) => wordText(w, src));
        const literalProgram = isLiteralProgram(args[0]);
        const name = programName(args[0], src);
        out.commands.push({ words: words.map((w) => w.text), literalProgram, ...(name !== undefined && { name }) });
        if (!literalProgram) mark(`the program name ${JSON.stringify(words[0].text)} is an expansion`);
        nested(words, name, depth, out, mark);
        if (name !== undefined && WRAPPERS.has(name)) unwrap(words, args, src, depth, out, mark);
        return true;
      }
      case 'DeclClause': // export/declare/local/readonly: a builtin with its arguments as written
        out.commands.push({ words: sourceOf(node, src).split(/\s+/), literalProgram: true });
        return true;
      case 'FuncDecl':
        mark('it defines a function, which can stand in for any program name');
        return true;
      default:
        return true;
    }
  });
  return out;
}

/**
 * What a wrapper may run: each tail of its arguments that starts at a word that is no option
 * and no assignment (`timeout 5 rm x` gives `5 rm x` and `rm x`), and what those run in turn.
 */
function unwrap(
  words: Array<{ text: string; literal: boolean }>,
  args: ShNode[],
  src: Buffer,
  depth: number,
  out: ParsedCommand,
  mark: (why: string) => void,
): void {
  const via = basename(words[0].text);
  for (let k = 1; k < words.length; k++) {
    if (words[k].text.startsWith('-') || /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[k].text)) continue;
    const tail = words.slice(k);
    const literal = isLiteralProgram(args[k]);
    const name = programName(args[k], src);
    out.commands.push({ words: tail.map((w) => w.text), literalProgram: literal, ...(name !== undefined && { name }), via });
    nested(tail, name, depth, out, mark);
  }
}

/**
 * The command strings a program runs as lines of their own, parsed in turn (a variable there
 * is not judgeable): `sh -c '…'`, `eval '…'`, `script -c '…'` (`--command`), `trap '…' SIG`.
 */
function nested(
  words: Array<{ text: string; literal: boolean }>,
  program: string | undefined,
  depth: number,
  out: ParsedCommand,
  mark: (why: string) => void,
): void {
  if (program === undefined) return;
  if (program === 'alias') return mark('it defines an alias');
  let inner: Array<{ text: string; literal: boolean }> | undefined;
  if (program === 'eval' || program === 'source' || program === '.') {
    if (program !== 'eval') return mark(`${program} runs a script the policy cannot read`);
    inner = words.slice(1);
  } else if (program === 'trap') {
    const action = words.findIndex((w, i) => i > 0 && !/^-[lp-]*$/.test(w.text)); // after -p, -l, --
    if (action < 0 || words.length <= action + 1) return; // trap -p / trap ACTION alone lists or resets
    inner = words.slice(action, action + 1);
  } else if (SHELLS.has(program)) {
    const long = words.findIndex((w, i) => i > 0 && /^--command(=|$)/.test(w.text));
    if (long > 0 && words[long].text.includes('='))
      inner = [{ text: words[long].text.slice('--command='.length), literal: words[long].literal }];
    else {
      const c = long > 0 ? long : words.findIndex((w, i) => i > 0 && /^-[a-zA-Z]*c[a-zA-Z]*$/.test(w.text));
      if (c < 0) return mark(`${program} runs a script or its standard input, which the policy cannot read`);
      inner = words.slice(c + 1, c + 2);
    }
  }
  if (!inner) return;
  if (inner.some((w) => !w.literal)) return mark(`${program} runs a command built by an expansion`);
  if (depth >= MAX_DEPTH) return mark(`${program} nests too deep`);
  const sub = parseCommand(inner.map((w) => w.text).join(' '), depth + 1);
  out.commands.push(...sub.commands);
  if (sub.unjudgeable) mark(sub.unjudgeable);
}

/**
 * The program's name when its last path segment is literal: the whole word for a literal
 * program, else the literal text after the word's last `/` (`~/bin/rm`, `"$D"/rm` give rm).
 */
function programName(word: ShNode, src: Buffer): string | undefined {
  if (isLiteralProgram(word)) return basename(wordText(word, src).text);
  let tail = '';
  for (const part of [...((word.Parts as ShNode[]) ?? [])].reverse()) {
    const t = NodeType(part);
    const piece =
      t === 'Lit' || t === 'SglQuoted' || (t === 'DblQuoted' && ((part.Parts as ShNode[]) ?? []).every((q) => NodeType(q) === 'Lit'))
        ? literalText(part)
        : undefined;
    if (piece === undefined || (t === 'Lit' && /[*?[{]/.test(piece))) break;
    tail = piece + tail;
    if (tail.includes('/')) break;
  }
  const name = tail.slice(tail.lastIndexOf('/') + 1);
  return tail.includes('/') && name !== '' ? name : undefined;
}

/** A literal part's text after quote removal. */
function literalText(part: ShNode): string {
  const t = NodeType(part);
  if (t === 'Lit') return unescapeBare(String(part.Value));
  if (t === 'SglQuoted') return part.Dollar ? ansiC(String(part.Value)) : String(part.Value);
  return ((part.Parts as ShNode[]) ?? []).map((q) => unescapeDouble(String(q.Value))).join('');
}

/** The last path segment: `/usr/bin/rm` runs rm. */
export function basename(program: string): string {
  return program.slice(program.lastIndexOf('/') + 1);
}

/** A word's text after quote removal; `literal` false when any part of it is an expansion. */
function wordText(word: ShNode, src: Buffer): { text: string; literal: boolean } {
  let text = '';
  let literal = true;
  for (const part of (word.Parts as ShNode[]) ?? []) {
    const t = NodeType(part);
    if (t === 'Lit') text += unescapeBare(String(part.Value));
    else if (t === 'SglQuoted') text += part.Dollar ? ansiC(String(part.Value)) : String(part.Value);
    else if (t === 'DblQuoted') {
      for (const q of (part.Parts as ShNode[]) ?? []) {
        if (NodeType(q) === 'Lit') text += unescapeDouble(String(q.Value));
        else {
          text += sourceOf(q, src);
          literal = false;
        }
      }
    } else {
      text += sourceOf(part, src); // $X, $(…), $'…', globs… as written
      literal = false;
    }
  }
  return { text, literal };
}

/** A program word bash runs as written: no expansion, and no unquoted glob or brace that could become another name. */
function isLiteralProgram(word: ShNode): boolean {
  return ((word.Parts as ShNode[]) ?? []).every((p) => {
    const t = NodeType(p);
    if (t === 'Lit') return !/[*?[{~]/.test(String(p.Value));
    if (t === 'SglQuoted') return true; // $'…' is decoded like any quote (ansiC)
    return t === 'DblQuoted' && ((p.Parts as ShNode[]) ?? []).every((q) => NodeType(q) === 'Lit');
  });
}

/** ANSI-C quoting `$'…'` as bash decodes it (`$'r\x6d'` is rm); an unknown escape is kept as bash keeps it. */
const ANSI_C: Record<string, string> = {
  a: '\x07',
  b: '\b',
  e: '\x1b',
  E: '\x1b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '?': '?',
};
function ansiC(s: string): string {
  return s.replace(/\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c[\s\S]|[\s\S])/g, (all, e: string) => {
    if (/^[xuU]/.test(e)) return safeCodePoint(parseInt(e.slice(1), 16), all);
    if (/^[0-7]/.test(e)) return String.fromCharCode(parseInt(e, 8) & 0xff);
    if (e[0] === 'c' && e.length === 2) return String.fromCharCode(e.charCodeAt(1) & 0x1f);
    return ANSI_C[e] ?? all;
  });
}
const safeCodePoint = (n: number, fallback: string) => (n <= 0x10ffff ? String.fromCodePoint(n) : fallback);

/** Outside quotes a backslash keeps the next character (a line continuation is already gone). */
function unescapeBare(s: string): string {
  return s.replace(/\\([\s\S])/g, '$1');
}

/** Inside double quotes a backslash escapes only $ ` " \ and newline. */
function unescapeDouble(s: string): string {
  return s.replace(/\\([$`"\\\n])/g, (_, c: string) => (c === '\n' ? '' : c));
}

function sourceOf(node: ShNode, src: Buffer): string {
  return src.subarray(node.Pos().Offset(), node.End().Offset()).toString('utf8');
}
