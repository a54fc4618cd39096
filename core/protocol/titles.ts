/**
 * Session titles (issue 33), without zod so the web page takes them too: how long one may be,
 * and the title a first prompt gives a session nobody named.
 */

/** Longest session title kept (a rename longer than this is refused). */
export const TITLE_MAX_CHARS = 200;
/** A title taken from the first prompt is cut to this many characters. */
export const PROMPT_TITLE_CHARS = 80;

/**
 * The title a first prompt gives a session: its text on one line, cut at PROMPT_TITLE_CHARS (at a
 * word where one is near) with an ellipsis; undefined for a prompt without text.
 */
export function titleFromPrompt(message: unknown): string | undefined {
  const content = (message as { content?: unknown } | undefined)?.content;
  const text =
    typeof content === 'string' ? content : Array.isArray(content) ? content.map((b) => (isTextBlock(b) ? b.text : '')).join(' ') : '';
  const line = text.replace(/\s+/g, ' ').trim();
  if (!line) return undefined;
  if (line.length <= PROMPT_TITLE_CHARS) return line;
  const cut = line.slice(0, PROMPT_TITLE_CHARS - 1);
  const space = cut.lastIndexOf(' ');
  return `${space > PROMPT_TITLE_CHARS / 2 ? cut.slice(0, space) : cut}…`;
}

/** A text content block: any line a client sends may hold anything, so every block is checked. */
function isTextBlock(b: unknown): b is { text: string } {
  return (
    typeof b === 'object' && b !== null && (b as { type?: unknown }).type === 'text' && typeof (b as { text?: unknown }).text === 'string'
  );
}
