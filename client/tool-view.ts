/**
 * How a tool call reads, for every client (the terminal client and the web page share this
 * module; it uses nothing but the language, so it runs in Node and in a browser). Bash reads
 * as its command, Read/Write/Edit as the file's path, Edit/MultiEdit/Write as a line diff,
 * AskUserQuestion as its question; anything else as compact JSON.
 */

/** One line of a diff: kept (' '), removed ('-') or added ('+'). */
export interface DiffLine {
  op: ' ' | '-' | '+';
  text: string;
}

/** A tool call as a person reads it. */
export interface ToolView {
  /** The tool's name as the engine gave it. */
  name: string;
  /** One line saying what it does: the command, the path, the pattern, the question. */
  summary: string;
  /** For file edits: the change as a line diff (old → new). */
  diff?: DiffLine[];
  /** For file edits: the file. */
  path?: string;
}

/** Lines compared at most per side by {@link lineDiff}; beyond, the diff is "all removed, all added". */
export const MAX_DIFF_LINES = 400;

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Compact JSON of a value on one line (no escapes beyond JSON's own). */
function compact(value: unknown): string {
  return JSON.stringify(value) ?? '';
}

/** Reads one tool call. `input` is the tool_use input (or a permission prompt's input). */
export function viewTool(name: string, input: Record<string, unknown> | undefined): ToolView {
  const i = input ?? {};
  const path = str(i.file_path) ?? str(i.notebook_path) ?? str(i.path);
  switch (name) {
    case 'Bash':
      return { name, summary: str(i.command) ?? compact(i) };
    case 'Read':
    case 'NotebookEdit':
    case 'LS':
      return { name, summary: path ?? compact(i), path };
    case 'Write':
      return { name, summary: path ?? compact(i), path, diff: lineDiff('', str(i.content) ?? '') };
    case 'Edit':
      return { name, summary: path ?? compact(i), path, diff: lineDiff(str(i.old_string) ?? '', str(i.new_string) ?? '') };
    case 'MultiEdit': {
      const edits = Array.isArray(i.edits) ? (i.edits as Record<string, unknown>[]) : [];
      const diff = edits.flatMap((e, n) => [
        ...(n > 0 ? [{ op: ' ' as const, text: '…' }] : []),
        ...lineDiff(str(e.old_string) ?? '', str(e.new_string) ?? ''),
      ]);
      return { name, summary: path ?? compact(i), path, diff };
    }
    case 'Glob':
    case 'Grep':
      return { name, summary: [str(i.pattern), str(i.path)].filter(Boolean).join(' in ') || compact(i) };
    case 'WebFetch':
      return { name, summary: str(i.url) ?? compact(i) };
    case 'WebSearch':
      return { name, summary: str(i.query) ?? compact(i) };
    case 'Task':
    case 'Agent':
      return { name, summary: str(i.description) ?? str(i.prompt) ?? compact(i) };
    case 'TodoWrite':
      return { name, summary: Array.isArray(i.todos) ? `${i.todos.length} to-do item${i.todos.length === 1 ? '' : 's'}` : compact(i) };
    case 'AskUserQuestion': {
      const qs = Array.isArray(i.questions) ? (i.questions as { question?: unknown }[]) : [];
      return {
        name,
        summary:
          qs
            .map((q) => str(q.question) ?? '')
            .filter(Boolean)
            .join(' / ') || compact(i),
      };
    }
    default:
      return { name, summary: compact(i) };
  }
}

/**
 * A line diff of two texts (longest common subsequence). Inputs over MAX_DIFF_LINES lines a
 * side are shown as everything removed, then everything added, so the cost stays bounded.
 */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before === '' ? [] : before.split('\n');
  const b = after === '' ? [] : after.split('\n');
  if (a.length > MAX_DIFF_LINES || b.length > MAX_DIFF_LINES) {
    return [...a.map((text) => ({ op: '-' as const, text })), ...b.map((text) => ({ op: '+' as const, text }))];
  }
  // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push({ op: ' ', text: a[i] });
      i++;
      j++;
    } else if (i < a.length && (j >= b.length || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push({ op: '-', text: a[i++] }); // removals before additions, as diffs read
    } else {
      out.push({ op: '+', text: b[j++] });
    }
  }
  return out;
}

/** The text of a tool_result's content (a string, or text blocks), for display. */
export function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content === undefined ? '' : compact(content);
  return (content as Record<string, unknown>[])
    .map((b) => (b.type === 'text' && typeof b.text === 'string' ? b.text : b.type === 'image' ? '[image]' : compact(b)))
    .join('\n');
}

/** What the central policy did with a tool call, in words (terminal and web). */
export function policyLine(decision: 'deny' | 'ask' | 'allow', tool: string): string {
  return decision === 'deny'
    ? `policy denied ${tool}`
    : decision === 'ask'
      ? `policy asks people before ${tool}`
      : `policy allowed ${tool}`;
}
