import { options } from 'preact';

/**
 * Preact renders what changed once per animation frame instead of once per change. Each
 * `session.frame` arrives in a task of its own and bumps the session's version, and Preact's
 * default (a microtask) then diffed the whole transcript once per frame: a burst of 4,000
 * frames arriving live took a 2,000-turn session 15 s on 2 CPUs, where the same frames as a
 * replay (one version bump) took 0.35 s. What is drawn is the same: the browser paints once per
 * animation frame anyway. A hidden page gets no animation frames, so a timer renders it too.
 */
export function renderOncePerFrame(): void {
  options.debounceRendering = (render) => {
    let done = false;
    const once = () => {
      if (done) return;
      done = true;
      render();
    };
    requestAnimationFrame(once);
    setTimeout(once, HIDDEN_PAGE_RENDER_MS);
  };
}

/** How soon a page that gets no animation frames (hidden) renders a change anyway. */
const HIDDEN_PAGE_RENDER_MS = 100;
