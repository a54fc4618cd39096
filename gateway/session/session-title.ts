import { titleFromPrompt, TITLE_MAX_CHARS } from '../../core/protocol/titles.js';

/** Who gave the title: a name the engine or the owner chose outlives the first prompt's. */
type TitleSource = 'prompt' | 'named';

/**
 * A session's title (issue 33): the engine's own (`system/session_title_changed`) or the
 * owner's rename, whichever came last; before either, the first prompt's text. Kept in the
 * history (the prompt event, the engine's line, the `title_changed` event), so a restarted or
 * taking-over gateway reads it back with the rest of the session.
 */
export class SessionTitleKeeper {
  private title: string | undefined;
  private source: TitleSource | undefined;

  get current(): string | undefined {
    return this.title;
  }

  /** A prompt went to the engine: the first one titles a session nobody named. */
  prompted(message: unknown): void {
    if (this.source !== undefined) return;
    const t = titleFromPrompt(message);
    if (t === undefined) return;
    this.title = t;
    this.source = 'prompt';
  }

  /** The engine or the owner named the session (bounded here too: the engine's title is not checked elsewhere). */
  named(title: string): void {
    const t = title.replace(/\s+/g, ' ').trim().slice(0, TITLE_MAX_CHARS);
    if (!t) return;
    this.title = t;
    this.source = 'named';
  }
}

/** The title in an engine line of `system/session_title_changed` (the engine's answer to rename_session); undefined if none. */
export function engineTitleOf(line: Uint8Array): string | undefined {
  try {
    const v = JSON.parse(Buffer.from(line).toString('utf8')) as { title?: unknown };
    return typeof v.title === 'string' ? v.title : undefined;
  } catch {
    return undefined;
  }
}
