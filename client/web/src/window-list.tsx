/**
 * A list that renders only the rows near the window's view (a long session has thousands):
 * the rest stand in as two spacers sized from each row's measured height (an estimate until
 * a row was once on screen). The page scrolls the window, so the list reads the window's scroll.
 * Cost: find-in-page (Ctrl-F) sees only the rows rendered (docs/performance.md).
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';

/** A row's height before it was measured. */
const ESTIMATE_PX = 90;
/** Rows rendered beyond the view, above and below, so a scroll shows no blank. */
const OVERSCAN_PX = 900;

export function WindowList<T>({
  items,
  keyOf,
  render,
  onResize,
}: {
  items: readonly T[];
  keyOf: (item: T) => number;
  render: (item: T) => ComponentChildren;
  onResize?: () => void;
}) {
  const box = useRef<HTMLDivElement>(null);
  const heights = useRef(new Map<number, number>()).current;
  // The view in the list's own coordinates (0 = its top), with the overscan.
  const [view, setView] = useState({ top: -OVERSCAN_PX, bottom: innerHeight + OVERSCAN_PX });
  const [, remeasured] = useState(0);

  useEffect(() => {
    let frame = 0;
    const onScroll = () => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        const top = -(box.current?.getBoundingClientRect().top ?? 0);
        // The rendered rows stay while the view keeps half the overscan on each side: a page that
        // follows a streaming answer down a few pixels a delta does not re-render its list each time.
        const inside = (v: typeof view) =>
          top >= v.top + OVERSCAN_PX / 2 &&
          top + innerHeight <= v.bottom - OVERSCAN_PX / 2 &&
          v.bottom - v.top === innerHeight + 2 * OVERSCAN_PX;
        setView((v) => (inside(v) ? v : { top: top - OVERSCAN_PX, bottom: top + innerHeight + OVERSCAN_PX }));
      });
    };
    onScroll();
    addEventListener('scroll', onScroll, { passive: true });
    addEventListener('resize', onScroll);
    return () => {
      cancelAnimationFrame(frame);
      removeEventListener('scroll', onScroll);
      removeEventListener('resize', onScroll);
    };
  }, []);

  const height = (item: T) => heights.get(keyOf(item)) ?? ESTIMATE_PX;
  let start = 0;
  let y = 0;
  while (start < items.length && y + height(items[start]) < view.top) y += height(items[start++]);
  const above = y;
  let end = start;
  while (end < items.length && y < view.bottom) y += height(items[end++]);
  let below = 0;
  for (let i = end; i < items.length; i++) below += height(items[i]);

  // Measure what rendered; a changed height redraws the spacers (and lets the page keep to the bottom).
  useLayoutEffect(() => {
    let changed = false;
    for (const row of box.current?.querySelectorAll<HTMLElement>(':scope > [data-row]') ?? []) {
      const k = Number(row.dataset.row);
      const h = row.offsetHeight;
      if (heights.get(k) !== h) {
        heights.set(k, h);
        changed = true;
      }
    }
    if (changed) {
      remeasured((n) => n + 1);
      onResize?.();
    }
  });

  return (
    <div class="rows" ref={box}>
      <div style={{ height: `${above}px` }} aria-hidden="true" />
      {items.slice(start, end).map((item) => (
        <div class="row" key={keyOf(item)} data-row={String(keyOf(item))}>
          {render(item)}
        </div>
      ))}
      <div style={{ height: `${below}px` }} aria-hidden="true" />
    </div>
  );
}
