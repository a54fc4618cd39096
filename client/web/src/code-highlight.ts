/**
 * Highlights the code blocks of a finished message. The highlighter is a separate chunk fetched
 * on the first code block, so a page without code never loads it.
 */
type Highlight = (code: HTMLElement) => void;
let loading: Promise<Highlight> | undefined;

/** Highlights `root`'s fenced code blocks that name a language, once each (marked by data-hl). */
export function highlightIn(root: HTMLElement): void {
  const blocks = [...root.querySelectorAll<HTMLElement>('pre > code[class*="language-"]:not([data-hl])')];
  if (blocks.length === 0) return;
  loading ??= import('./highlighter').then(
    (m) => m.highlightCode,
    () => ((loading = undefined), () => {}), // unreachable chunk: the code stays plain, a later block tries again
  );
  void loading.then((highlight) => {
    for (const code of blocks) {
      if (code.dataset.hl || !code.isConnected) continue;
      code.dataset.hl = '';
      highlight(code);
    }
  });
}
