/** The Changes panel: what the session changed in its folder, read by its agent (issue #34); viewers see it too. */
import { useEffect, useState } from 'preact/hooks';
import type { FolderResultOf } from '../../../core/protocol/folder-view.js';
import { Diff } from './entries';
import { ErrorAlert } from './error-alert';
import { patchLines } from './patch-lines';
import type { OpenSession } from './session';
import { useStore } from './store';

/** Where the folder stands: its branch (or a detached HEAD), its upstream and how far apart they are. */
function whereLabel(s: FolderResultOf<'status'>): string {
  const at = s.branch ? `on ${s.branch}` : s.head ? `HEAD detached at ${s.head.slice(0, 10)}` : 'no commits yet';
  return s.upstream === undefined ? at : `${at} · ${s.upstream}: ${s.ahead ?? 0} ahead, ${s.behind ?? 0} behind`;
}

export function ChangesPanel({ session }: { session: OpenSession }) {
  const { filesVersion } = useStore(session.view);
  const [status, setStatus] = useState<FolderResultOf<'status'>>();
  const [list, setList] = useState<FolderResultOf<'diff'>>();
  const [open, setOpen] = useState<FolderResultOf<'diff'>>();
  const [file, setFile] = useState<string>();
  const [base, setBase] = useState<string>();
  const [draft, setDraft] = useState('');
  const [error, setError] = useState<string>();
  const [asked, setAsked] = useState(0);
  const onBase = base ? { base } : {};

  // Read again when opened, when an Edit/Write/Bash/NotebookEdit call finished, on Refresh, and for another base.
  useEffect(() => {
    let live = true;
    setError(undefined);
    Promise.all([session.folder({ view: 'status' }), session.folder({ view: 'diff', stat: true, ...onBase })]).then(
      ([s, d]) => live && (setStatus(s), setList(d)),
      (err: Error) => live && setError(err.message),
    );
    return () => {
      live = false;
    };
  }, [session, filesVersion, base, asked]);
  useEffect(() => {
    let live = true;
    if (file === undefined) setOpen(undefined);
    else
      session.folder({ view: 'diff', path: file, ...onBase }).then(
        (d) => live && setOpen(d),
        (err: Error) => live && setError(err.message),
      );
    return () => {
      live = false;
    };
  }, [session, file, filesVersion, base, asked]);

  const staged = new Set(status?.files.filter((f) => f.staged).map((f) => f.path));
  return (
    <section class="changes" aria-label="Changes" data-testid="changes">
      <div class="changes-head">
        <h2 class="changes-title">Changes</h2>
        {status && (
          <span class="mono small" data-testid="changes-where">
            {whereLabel(status)}
          </span>
        )}
        <form
          class="changes-base"
          onSubmit={(e) => {
            e.preventDefault();
            setBase(draft.trim() === '' ? undefined : draft.trim());
          }}
        >
          <label>
            Compare with{' '}
            <input name="base" placeholder="HEAD" value={draft} onInput={(e) => setDraft((e.target as HTMLInputElement).value)} />
          </label>{' '}
          <button type="submit">Compare</button>
        </form>
        <button type="button" onClick={() => setAsked((n) => n + 1)}>
          Refresh
        </button>
      </div>
      <ErrorAlert error={error} />
      {list && (
        <p class="muted small" data-testid="changes-summary">
          {list.files.length === 0 ? 'No changes' : `${list.files.length} file${list.files.length === 1 ? '' : 's'} changed`} against{' '}
          <span class="mono">{list.base}</span>
          {list.base_commit && <span class="mono"> ({list.base_commit.slice(0, 10)})</span>}
          {list.cut && ` · ${list.cut}`}
        </p>
      )}
      {list && list.files.length > 0 && (
        <ul class="changed-files">
          {list.files.map((f) => (
            <li key={f.path}>
              <button
                type="button"
                aria-pressed={file === f.path}
                onClick={() => setFile(file === f.path ? undefined : f.path)}
                data-testid="changed-file"
              >
                <span class="mono changed-path">{f.path}</span>{' '}
                {f.binary ? (
                  <span class="muted small">binary</span>
                ) : (
                  <span class="small">
                    <span class="added">+{f.added ?? 0}</span> <span class="deleted">−{f.deleted ?? 0}</span>
                  </span>
                )}
                {f.untracked && <span class="muted small"> new</span>}
                {staged.has(f.path) && <span class="muted small"> staged</span>}
              </button>
            </li>
          ))}
        </ul>
      )}
      {open && file !== undefined && (
        <div class="file-diff" data-testid="file-diff">
          <h3 class="mono small">{file}</h3>
          {open.patch ? <Diff lines={patchLines(open.patch)} /> : <p class="muted small">No difference against {open.base}.</p>}
          {open.cut && <p class="note">{open.cut}</p>}
        </div>
      )}
    </section>
  );
}
