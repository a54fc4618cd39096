/** Markdown to safe HTML: marked renders, DOMPurify removes anything that could run or load. */
import DOMPurify from 'dompurify';
import { marked } from 'marked';

marked.setOptions({ gfm: true, breaks: false });
marked.use({
  renderer: {
    // Task list boxes as text, not inputs (no form controls in model output).
    checkbox: ({ checked }) =>
      `<span class="task-box" role="img" aria-label="${checked ? 'done' : 'not done'}">${checked ? '☑' : '☐'}</span> `,
    // Every code block gets a copy button (session-page's click handler does the copying).
    code: ({ text, lang }) =>
      `<div class="code-block"><button type="button" class="copy" data-copy="">Copy</button><pre><code${lang ? ` class="language-${escapeAttr(lang)}"` : ''}>${escapeHtml(text)}</code></pre></div>`,
  },
});

const escapeHtml = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const escapeAttr = (t: string) => escapeHtml(t).replace(/"/g, '&quot;').replace(/\s/g, '');

/** Copies the code block a copy button belongs to; true when the click was on one. */
export function copyCodeOnClick(e: MouseEvent): boolean {
  const button = (e.target as Element | null)?.closest?.('button.copy');
  const code = button?.parentElement?.querySelector('pre');
  if (!button || !code) return false;
  void navigator.clipboard?.writeText(code.textContent ?? '').then(
    () => (button.textContent = 'Copied'),
    () => (button.textContent = 'Copy failed'),
  );
  return true;
}

/** How many times markdown was parsed: the tests read it (a finished message is parsed once, issue 28). */
export const markdownStats = { parses: 0 };
(globalThis as { __tetherMarkdown?: typeof markdownStats }).__tetherMarkdown = markdownStats;

/** HTML for untrusted markdown (model output): no scripts, no event handlers, no remote loads but links. */
export function renderMarkdown(text: string): string {
  markdownStats.parses++;
  const html = marked.parse(text, { async: false }) as string;
  return DOMPurify.sanitize(html, { FORBID_TAGS: ['style', 'form', 'input', 'img', 'iframe'], FORBID_ATTR: ['style'] });
}

// Links the model writes open in a new tab and never tell the target where they came from.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});
