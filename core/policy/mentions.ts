/**
 * The file @-mentions in a prompt. The engine reads a mentioned file (or lists a mentioned
 * folder) into the prompt itself, with no tool call, so no hook or permission prompt sees it
 * (docs/engine-protocol.md, "@-mentions"); the gateway and the agent find the mentions here and
 * judge them before the prompt reaches the engine. Pure: no I/O.
 *
 * The forms are the engine's (test/mention-forms.test.ts holds them to the CLI): an "@" at the
 * start or after white space or 。、？！ (so not in `foo@bar.com`, nor in code such as
 * `from '@/lib'`), then `"a quoted path"` or a run of non-space characters without its trailing
 * punctuation; a `#L1-5` line range is cut off.
 */

import { TetherError } from '../errors.js';

/** Most mentions in one prompt (repeats count); a prompt with more is refused, since each costs a realpath at the agent. */
export const MAX_MENTIONS = 256;

const WORD = /[A-Za-z0-9_]/;
/** What may stand before a mention's "@" (besides the start of the text). */
const BEFORE = /[\s\u3002\u3001\uFF1F\uFF01]/;
/** A path longer than this (PATH_MAX) names no file; the bound keeps each match short. */
const MAX_PATH_CHARS = 4096;
const QUOTED = new RegExp(`@"([^"]{1,${MAX_PATH_CHARS}})"`, 'y');
const BARE = new RegExp(`@(\\S{1,${MAX_PATH_CHARS}})`, 'y');

/**
 * The paths mentioned in a text, as written (relative, absolute, `~/…`), without line ranges,
 * added to `out`. Throws INVALID_ARGUMENT past {@link MAX_MENTIONS} mentions.
 */
function collect(text: string, out: Set<string>, seen: { n: number }): void {
  for (let at = text.indexOf('@'); at !== -1; at = text.indexOf('@', at + 1)) {
    if (at > 0 && !BEFORE.test(text[at - 1])) continue; // foo@bar.com, '@/lib' are no mentions
    QUOTED.lastIndex = BARE.lastIndex = at;
    const quoted = QUOTED.exec(text);
    const bare = quoted ? undefined : BARE.exec(text)?.[1];
    if (!quoted && !bare) continue;
    if (++seen.n > MAX_MENTIONS)
      throw new TetherError('INVALID_ARGUMENT', `a prompt may hold at most ${MAX_MENTIONS} @-mentions`, { limit: MAX_MENTIONS });
    // The engine drops trailing punctuation: "@notes.txt," reads notes.txt, "@src/" lists src.
    const path = quoted ? quoted[1] : bare!.startsWith('"') ? undefined : withoutTrailingPunctuation(bare!);
    const file = path?.includes('#') && !path.startsWith('#') ? path.slice(0, path.indexOf('#')) : path;
    if (file) out.add(file);
  }
}

function withoutTrailingPunctuation(s: string): string {
  let end = s.length;
  while (end > 0 && !WORD.test(s[end - 1])) end--;
  return s.slice(0, end);
}

/**
 * The paths mentioned in a user message's content (a string, or the text of its text blocks),
 * as written, deduplicated. Throws INVALID_ARGUMENT past {@link MAX_MENTIONS} mentions.
 */
export function mentionsInContent(content: unknown): string[] {
  const out = new Set<string>();
  const seen = { n: 0 };
  if (typeof content === 'string') collect(content, out, seen);
  else if (Array.isArray(content)) {
    for (const block of content) {
      const b = block as { type?: unknown; text?: unknown } | null;
      if (b?.type === 'text' && typeof b.text === 'string') collect(b.text, out, seen);
    }
  }
  return [...out];
}

/** The mentions of a `user` input line (none for other lines). */
export function mentionsInLine(line: Record<string, unknown>): string[] {
  if (line.type !== 'user') return [];
  return mentionsInContent((line.message as { content?: unknown } | undefined)?.content);
}
