/** One session: who is here, the controls, the transcript with its prompts, the composer. */
import { SessionTitle } from './session-title';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { FollowToggle, useVisibilityReport } from './notify';
import { announce } from './announcer';
import { ChangesPanel } from './changes-panel';
import { ErrorAlert } from './error-alert';
import { askNotifications, attention } from './attention';
import { Composer } from './composer';
import { PERMISSION_MODES } from './dashboard';
import { EntryView, MemoEntry, entrySig } from './entries';
import { download, transcriptJson, transcriptMarkdown } from './export';
import { PermissionCard } from './permission';
import type { ModelChoice, OpenSession } from './session';
import { contextLabel, costLabel } from './session-meter';
import { useStore } from './store';
import { WindowList } from './window-list';
import { stateLabel } from './wording';

/** To the very bottom (scrollIntoView would stop short by the page's scroll padding, which reads as "scrolled up"). */
const toBottom = () => window.scrollTo({ top: document.documentElement.scrollHeight });

/**
 * The modes a running session can switch to: bypassPermissions only when it started in it (the
 * engine refuses to switch into it otherwise: `bypass_not_launched`, engine-protocol.md §5.2).
 */
const sessionModes = (started: string | undefined) =>
  PERMISSION_MODES.filter((m) => m !== 'bypassPermissions' || started === 'bypassPermissions');

/** The picker's entry for the engine's current model (its alias or the model it resolves to); '' when none is. */
const currentChoice = (models: ModelChoice[], current: string | undefined) =>
  models.find((m) => m.value === current)?.value ?? models.find((m) => m.resolvedModel === current && m.value !== 'default')?.value ?? '';

/** How close to the bottom (px) still counts as reading at the bottom. */
const FOLLOW_SLACK_PX = 48;

export function SessionPage({ session, onLeave }: { session: OpenSession; onLeave: () => void }) {
  const view = useStore(session.view);
  const t = session.transcript;
  const ended = view.state === 'ended';
  // An ended session takes no input: no composer, interrupt or pickers (answers to nothing would fail).
  const canControl = view.role !== 'viewer' && !ended;
  const [error, setError] = useState<string>();
  const pending = [...t.pending.values()];

  // Follow the bottom only while the reader is there; scrolled up, they keep their place and get a count of what is new.
  const following = useRef(true);
  const [follow, setFollow] = useState(true); // what renders; the ref is what the effects read at once
  const [seenCount, setSeenCount] = useState(0);
  const count = t.entries.length + t.queued.length;
  useEffect(() => {
    let lastY = window.scrollY;
    const onScroll = () => {
      // Only the reader scrolling up stops the following: content that grew below since the
      // last scroll to the bottom (frames arrive between it and this event) does not.
      const up = window.scrollY < lastY - 1;
      lastY = window.scrollY;
      const atBottom =
        window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - FOLLOW_SLACK_PX || (following.current && !up);
      if (atBottom && following.current) toBottom();
      if (atBottom !== following.current) {
        following.current = atBottom;
        setFollow(atBottom);
        setSeenCount(t.entries.length + t.queued.length);
      }
    };
    window.addEventListener('scroll', onScroll, { passive: true });
    return () => window.removeEventListener('scroll', onScroll);
  }, [session]);
  // Following, the page moves to the bottom before it paints: a streamed delta costs one frame, not
  // a frame with the new words below the view and then a second one scrolled.
  useLayoutEffect(() => {
    if (following.current) toBottom();
  }, [view.version]);
  // What happened since the page opened is said aloud once (what was there before is on the page).
  const said = useRef(t.announcement.count);
  useEffect(() => {
    attention(session.id, pending);
    if (t.announcement.count > said.current) announce(t.announcement.text);
    said.current = t.announcement.count;
  }, [view.version]);
  // Opened, the focus goes to the session's heading (the button that opened it is gone), unless
  // a permission card took it; no scroll, the page keeps to the bottom.
  const main = useRef<HTMLElement>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (!main.current?.contains(document.activeElement)) heading.current?.focus({ preventScroll: true });
  }, [session]);
  const jump = () => {
    following.current = true;
    setFollow(true);
    setSeenCount(count);
    toBottom();
  };
  const unseen = follow ? 0 : count - seenCount;
  useVisibilityReport(session.id);
  useEffect(() => {
    const onVisible = () => attention(session.id, [...t.pending.values()]);
    document.addEventListener('visibilitychange', onVisible);
    return () => document.removeEventListener('visibilitychange', onVisible);
  }, [session]);

  // The Changes panel takes the transcript's place while open; the page stops following the bottom meanwhile.
  const [changes, setChanges] = useState(false);
  const toggleChanges = () => {
    if (changes) jump();
    else {
      following.current = false;
      window.scrollTo({ top: 0 });
    }
    setChanges(!changes);
  };
  const act = (p: Promise<unknown>) => p.catch((err: Error) => setError(err.message));
  const present = [...view.present.entries()].map(([clientId, p]) => ({ clientId, ...p }));
  const answerers = [...new Set(present.filter((p) => p.role !== 'viewer').map((p) => p.principal))];
  return (
    <main class="session" data-role={view.role} ref={main}>
      <section class="session-head" aria-label="Session">
        <div>
          <button type="button" onClick={onLeave} title="Back to the dashboard">
            <span aria-hidden="true">← </span>Sessions
          </button>{' '}
          <h1 class="session-title" ref={heading} tabIndex={-1} data-testid="session-heading">
            <span class="sr-only">Session on </span>
            {session.info.agent}
            {session.info.options.cwd && (
              <>
                {' '}
                <span class="mono small">{session.info.options.cwd}</span>
              </>
            )}
          </h1>{' '}
          <SessionTitle title={view.title} owner={view.role === 'owner' && !ended} rename={(t) => session.rename(t)} />{' '}
          <span class={`state state-${view.state}`} data-testid="session-state">
            {stateLabel(view.state)}
          </span>{' '}
          <span class="role" data-testid="role">
            {view.role}
          </span>
          {view.role !== 'owner' && !ended && (
            <>
              {' '}
              <FollowToggle sessionId={session.id} follow={(on) => session.follow(on)} />
            </>
          )}
          {session.meter.cost !== undefined && (
            <>
              {' '}
              <span class="small" data-testid="session-cost" title="What this session has cost so far, as the engine reported it">
                {costLabel(session.meter.cost)}
              </span>
            </>
          )}
          {session.meter.context && (
            <>
              {' '}
              <span class="small context-use" data-testid="context-use">
                <label for="context-meter">Context</label>{' '}
                <meter id="context-meter" min={0} max={100} high={80} value={session.meter.context.percentage} />{' '}
                {contextLabel(session.meter.context)}
              </span>
            </>
          )}
        </div>
        <div class="muted small" data-testid="presence">
          Here: {present.length ? present.map((p) => `${p.name ?? p.principal} (${p.role})`).join(', ') : 'just you'}
        </div>
        {view.role === 'owner' && !ended && present.some((p) => p.clientId !== session.ownClientId && p.role !== 'owner') && (
          <ul class="handover" aria-label="Hand control">
            {present
              .filter((p) => p.clientId !== session.ownClientId && p.role !== 'owner')
              .map((p) => (
                <li key={p.clientId}>
                  <span data-testid="member-name" title={p.principal}>
                    {p.name ?? p.principal}
                  </span>{' '}
                  ({p.role}){' '}
                  {p.role === 'viewer' && p.mayControl === false ? (
                    <span class="muted small">(their sign-in only allows watching)</span>
                  ) : (
                    <button type="button" onClick={() => act(session.setRole(p.clientId, p.role === 'viewer' ? 'controller' : 'viewer'))}>
                      {p.role === 'viewer' ? `Let ${p.principal} control` : `Make ${p.principal} a viewer`}
                    </button>
                  )}
                  {p.principal !== session.principal && (
                    <>
                      {' '}
                      <button type="button" onClick={() => act(session.setOwner(p.principal))}>{`Make ${p.principal} the owner`}</button>
                    </>
                  )}
                </li>
              ))}
          </ul>
        )}
        {t.standingRules.length > 0 && (
          <div class="standing-rules small" data-testid="standing-rules">
            Allowed for this session without asking:
            <ul>
              {t.standingRules.map((r) => (
                <li key={r.rule}>
                  <code>{r.rule}</code> (by {r.grantedBy}, for {r.grantedFor})
                  {canControl && (view.role === 'owner' || r.grantedBy === session.principal) && (
                    <>
                      {' '}
                      <button
                        type="button"
                        class="small"
                        onClick={() => act(session.withdrawRule(r.rule))}
                        aria-label={`Withdraw ${r.rule}`}
                      >
                        Withdraw
                      </button>
                    </>
                  )}
                </li>
              ))}
            </ul>
          </div>
        )}
        {ended && (
          <div class="readonly" role="note" data-testid="ended">
            This session has ended: you can read and export it, nothing more.
          </div>
        )}
        {view.role === 'viewer' && (
          <div class="readonly" role="note" data-testid="read-only">
            You are watching read-only: you see everything and can change nothing.
          </div>
        )}
        <div class="controls">
          {canControl && (
            <>
              <button type="button" class="danger" onClick={() => act(session.control('interrupt'))}>
                Interrupt
              </button>
              {t.queued.length > 0 && (
                <button type="button" class="danger" onClick={() => act(session.control('interrupt', { cancel_queued: true }))}>
                  Interrupt and clear the queue ({t.queued.length})
                </button>
              )}
              {session.models && session.models.length > 0 && (
                <label class="inline">
                  Model{' '}
                  <select
                    aria-label="Model"
                    value={currentChoice(session.models, t.model ?? session.info.options.model)}
                    onChange={(e) => act(session.control('set_model', { model: (e.target as HTMLSelectElement).value }))}
                  >
                    {!currentChoice(session.models, t.model ?? session.info.options.model) && (
                      <option value="" disabled>
                        {t.model ?? 'choose a model'}
                      </option>
                    )}
                    {session.models.map((m) => (
                      <option key={m.value} value={m.value} title={m.description}>
                        {m.displayName ?? m.value}
                      </option>
                    ))}
                  </select>
                </label>
              )}
              <label class="inline">
                Mode{' '}
                <select
                  aria-label="Permission mode"
                  value={t.permissionMode ?? session.info.options.permission_mode ?? 'default'}
                  onChange={(e) => act(session.control('set_permission_mode', { mode: (e.target as HTMLSelectElement).value }))}
                >
                  {sessionModes(session.info.options.permission_mode).map((m) => (
                    <option key={m} value={m}>
                      {m}
                    </option>
                  ))}
                </select>
              </label>
            </>
          )}
          {view.role === 'owner' && view.state !== 'ended' && (
            <button
              type="button"
              class="danger"
              onClick={() => confirm('Stop this session? The engine ends for everyone.') && act(session.stop())}
            >
              Stop session
            </button>
          )}
          <button type="button" aria-pressed={changes} onClick={toggleChanges} data-testid="changes-toggle">
            Changes
          </button>
          <button type="button" onClick={() => download(`tether-${session.id}.md`, transcriptMarkdown(session), 'text/markdown')}>
            Export Markdown
          </button>
          <button type="button" onClick={() => download(`tether-${session.id}.json`, transcriptJson(session), 'application/json')}>
            Export JSON
          </button>
          {typeof Notification !== 'undefined' && Notification.permission === 'default' && (
            <button type="button" onClick={() => void askNotifications()}>
              Notify me
            </button>
          )}
        </div>
        <ErrorAlert error={error} />
      </section>
      {changes && <ChangesPanel session={session} />}
      <section class="transcript" aria-label="Transcript" data-testid="transcript" hidden={changes}>
        <WindowList
          items={t.entries}
          keyOf={(e) => e.id}
          render={(e) =>
            e.kind === 'permission' ? (
              <PermissionCard prompt={e.prompt} session={session} canAnswer={canControl} answerers={answerers} />
            ) : (
              <MemoEntry e={e} sig={entrySig(e)} />
            )
          }
          onResize={() => following.current && toBottom()}
        />
        {t.queued.length > 0 && (
          <ol class="queue" aria-label="Queued prompts" data-testid="queue">
            {t.queued.map((e) => (
              <li key={e.id} data-testid="queued-prompt">
                <EntryView e={e} />
                {canControl && e.uuid && !e.withdrawing && (view.role === 'owner' || e.principal === session.principal) && (
                  <button
                    type="button"
                    class="small"
                    onClick={() => act(session.withdrawPrompt(e.uuid!))}
                    aria-label={`Withdraw ${e.principal}'s queued prompt`}
                  >
                    Withdraw
                  </button>
                )}
              </li>
            ))}
          </ol>
        )}
        {!follow && !changes && (
          <button type="button" class="jump-latest" onClick={jump} data-testid="jump-latest">
            Jump to latest{unseen > 0 ? ` (${unseen} new)` : ''}
          </button>
        )}
      </section>
      {canControl && <Composer session={session} />}
    </main>
  );
}
