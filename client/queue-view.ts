import type { QueueChange, QueuedPrompt } from '../core/protocol/events.js';

/**
 * How a session's queue of prompts reads to a person, in the terminal and on the web page
 * alike: a stop that cleared it, where a prompt that left it joined the transcript, and the
 * text of a queued prompt. Plain strings; each client sanitizes and styles them.
 */

/** What a stop said (the `interrupt` event): "stopped by alice; 2 queued prompts cleared". */
export function stopText(principal: string, cleared: number | undefined): string {
  if (cleared === undefined) return `${principal} interrupted the turn`;
  return `stopped by ${principal}; ${cleared} queued prompt${cleared === 1 ? '' : 's'} cleared`;
}

/** How a prompt that left the queue joined the transcript (`started`), or what else happened to it. */
export function queueChangeText(change: QueueChange): string | undefined {
  switch (change.action) {
    case 'started':
      return change.steer
        ? `${change.by} steered: the running turn was cut here`
        : change.folded
          ? `${change.by}'s queued prompt joined the running turn here`
          : `${change.by}'s queued prompt started`;
    case 'withdrawn':
      return `${change.by} withdrew a queued prompt`;
    default:
      return undefined; // queued and withdrawing show in the list; cleared is said by the stop
  }
}

/** A queued prompt's text, for a list: its string content, or its content blocks' text. */
export function queuedText(p: QueuedPrompt): string {
  const content = (p.message as { content?: unknown } | undefined)?.content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((b) =>
      typeof b === 'object' && b !== null && typeof (b as { text?: unknown }).text === 'string' ? (b as { text: string }).text : '',
    )
    .join(' ');
}
