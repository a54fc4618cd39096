/**
 * Where a prompt sent while a turn runs goes (the engine's `priority`, docs/engine-protocol.md
 * section 3.2): `later` waits for its own turn after the running one, `next` may be folded
 * into the running turn at its next tool round, `now` cuts the running step and runs at once
 * (a steer). No zod here: the web page imports it.
 */
export const PROMPT_PRIORITIES = ['now', 'next', 'later'] as const;
export type PromptPriority = (typeof PROMPT_PRIORITIES)[number];

/** What Tether's clients send unless their sender steers: a prompt typed mid-turn waits its turn. */
export const QUEUED_PRIORITY: PromptPriority = 'later';
/** What the engine does with a prompt that names no priority. */
export const ENGINE_DEFAULT_PRIORITY: PromptPriority = 'next';
