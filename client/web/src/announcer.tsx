/**
 * The page's one live region: short sentences a screen reader says when something happens
 * that a person waits for (an answer finished, a permission request, the link lost or back).
 * The transcript itself is not live: streamed words are not read out one by one.
 */
import { Store, useStore } from './store';

const said = new Store({ count: 0, text: '' });

/** Says `text` once (the same words said twice are said twice). */
export function announce(text: string): void {
  said.set({ count: said.get().count + 1, text });
}

/** Rendered once, always there (a region added with its words in it is often not read). */
export function LiveRegion() {
  const s = useStore(said);
  // A new node per sentence: screen readers read additions, so a repeated sentence is read again.
  return (
    <div class="sr-only" role="status" data-testid="announcer">
      {s.text && <span key={s.count}>{s.text}</span>}
    </div>
  );
}
