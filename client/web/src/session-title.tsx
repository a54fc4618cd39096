/** The session's title in its page's header, and the owner's way to rename it. */
import { useState } from 'preact/hooks';
import { TITLE_MAX_CHARS } from '../../../core/protocol/titles.js';

export function SessionTitle(props: { title: string | undefined; owner: boolean; rename: (title: string) => Promise<void> }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState('');
  const [error, setError] = useState<string>();
  if (!editing)
    return (
      <span class="session-name">
        <span data-testid="session-title">{props.title ?? 'Untitled session'}</span>
        {props.owner && (
          <>
            {' '}
            <button
              type="button"
              class="small"
              onClick={() => {
                setDraft(props.title ?? '');
                setError(undefined);
                setEditing(true);
              }}
            >
              Rename
            </button>
          </>
        )}
      </span>
    );
  const save = async (e: Event) => {
    e.preventDefault();
    try {
      await props.rename(draft);
      setEditing(false);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <form class="rename" onSubmit={save} aria-label="Rename the session">
      <input
        name="title"
        aria-label="Session title"
        value={draft}
        maxLength={TITLE_MAX_CHARS}
        onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
      />{' '}
      <button type="submit" class="primary">
        Save
      </button>{' '}
      <button type="button" onClick={() => setEditing(false)}>
        Cancel
      </button>
      {error && (
        <span role="alert" class="error small">
          {' '}
          {error}
        </span>
      )}
    </form>
  );
}
