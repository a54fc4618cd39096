/**
 * Agents, sessions and what needs you, kept current by the gateway's pushed `fleet.changed`
 * (fleet.watch; listed again after each change and each reconnect, never on a timer); start a
 * session, open or watch one, search and filter the list.
 */
import { useEffect, useState } from 'preact/hooks';
import type { Connection } from './connection';
import { useStore } from './store';
import type { SessionInfo } from './session';
import { stateLabel } from './wording';
import { NeedsYou, type InboxItem } from './needs-you';
import { matches, SessionFilters, type Filter } from './session-filters';
import { TeamUsage } from './team-usage';

export const PERMISSION_MODES = ['default', 'acceptEdits', 'plan', 'auto', 'dontAsk', 'bypassPermissions'];

interface AgentInfo {
  name: string;
  host: string;
  engines: string[];
  connected_at: string;
  allows_bypass_permissions?: boolean;
}

const since = (iso: string) => new Date(iso).toLocaleString();

/** Most sessions one page holds (the gateway's SESSIONS_PAGE_MAX). */
const SESSIONS_PAGE = 500;

/** Every session the link's token may see, a page at a time (sessions.list with limit and cursor). */
async function allSessions(conn: Connection): Promise<SessionInfo[]> {
  const all: SessionInfo[] = [];
  let cursor: string | undefined;
  do {
    const page: { sessions: SessionInfo[]; next_cursor?: string } = await conn.request(
      'sessions.list',
      cursor === undefined ? { limit: SESSIONS_PAGE } : { limit: SESSIONS_PAGE, cursor },
    );
    all.push(...page.sessions);
    cursor = page.next_cursor === cursor ? undefined : page.next_cursor;
  } while (cursor !== undefined);
  return all;
}

/** One text field of the Start form: its label, its form name, and the state it writes. */
function TextField(props: { label: string; name: string; value: string; placeholder: string; onInput: (value: string) => void }) {
  return (
    <label>
      {props.label}
      <input
        name={props.name}
        value={props.value}
        placeholder={props.placeholder}
        onInput={(e) => props.onInput((e.target as HTMLInputElement).value)}
      />
    </label>
  );
}

export function Dashboard(props: {
  conn: Connection;
  onStart: (agent: string, options: Record<string, unknown>, engine?: string) => void;
  onAttach: (id: string, readOnly: boolean) => void;
}) {
  const [agents, setAgents] = useState<AgentInfo[]>([]);
  const [sessions, setSessions] = useState<SessionInfo[]>([]);
  const [agent, setAgent] = useState('');
  const [cwd, setCwd] = useState('');
  const [model, setModel] = useState('');
  const [mode, setMode] = useState('default');
  const [worktree, setWorktree] = useState(false);
  const [branch, setBranch] = useState('');
  const [engine, setEngine] = useState('');
  const [busy, setBusy] = useState(false);
  const [needs, setNeeds] = useState<InboxItem[]>([]);
  const [filter, setFilter] = useState<Filter>({ text: '', agent: '', owner: '', state: '' });

  useEffect(() => {
    let stop = false;
    // One listing at a time; changes told during one are listed once more after it.
    let loading = false;
    let again = false;
    const load = async (): Promise<void> => {
      if (loading) {
        again = true;
        return;
      }
      loading = true;
      try {
        const [a, s, n] = await Promise.all([props.conn.request('agents.list'), allSessions(props.conn), props.conn.request('inbox.list')]);
        if (stop) return;
        setAgents(a.agents);
        setSessions(s);
        setNeeds(n.items);
      } catch {
        // The banner says when the link is down; the reconnect lists again.
      } finally {
        loading = false;
        if (again && !stop) {
          again = false;
          void load();
        }
      }
    };
    const offChanged = props.conn.onNotification((method) => method === 'fleet.changed' && void load());
    // A new connection is watched again and listed afresh: what changed while it was down was told to nobody.
    const offReconnect = props.conn.onReconnect(async (request) => {
      await request('fleet.watch', {});
      void load();
    });
    void props.conn
      .request('fleet.watch')
      .catch(() => {})
      .then(load);
    return () => {
      stop = true;
      offChanged();
      offReconnect();
    };
  }, []);

  const { may } = useStore(props.conn.state);
  const chosen = agent || agents[0]?.name || '';
  const engines = agents.find((a) => a.name === chosen)?.engines ?? [];
  // An engine the chosen agent does not offer (another agent was picked): its default.
  const chosenEngine = engines.includes(engine) ? engine : '';
  const start = async (e: Event) => {
    e.preventDefault();
    if (!chosen) return;
    setBusy(true);
    const options: Record<string, unknown> = { include_partial_messages: true, permission_mode: mode };
    if (cwd.trim()) options.cwd = cwd.trim();
    if (model.trim()) options.model = model.trim();
    // A fresh git worktree of the folder's repository (core/protocol/worktree.ts); the agent names the branch when none is given.
    if (worktree) options.worktree = branch.trim() ? { branch: branch.trim() } : true;
    await props.onStart(chosen, options, chosenEngine || undefined);
    setBusy(false);
  };

  return (
    <main class="dashboard">
      <section aria-labelledby="agents-h">
        <h2 id="agents-h">Agents</h2>
        {agents.length === 0 ? (
          <p class="muted">No agent is connected.</p>
        ) : (
          <ul class="cards" data-testid="agents">
            {agents.map((a) => (
              <li key={a.name} class="card">
                <strong>{a.name}</strong> <span class="muted">on {a.host}</span>
                <div class="muted small">
                  engines: {a.engines.join(', ')} · connected since {since(a.connected_at)}
                </div>
              </li>
            ))}
          </ul>
        )}
      </section>
      {may.create ? (
        <section aria-labelledby="start-h">
          <h2 id="start-h">Start a session</h2>
          <form class="start" onSubmit={start}>
            <label>
              Agent
              <select value={chosen} onChange={(e) => setAgent((e.target as HTMLSelectElement).value)} name="agent">
                {agents.map((a) => (
                  <option key={a.name} value={a.name}>
                    {a.name}
                  </option>
                ))}
              </select>
            </label>
            <label>
              Engine
              <select value={chosenEngine} onChange={(e) => setEngine((e.target as HTMLSelectElement).value)} name="engine">
                <option value="">the agent's default{engines[0] ? ` (${engines[0]})` : ''}</option>
                {engines.map((name) => (
                  <option key={name} value={name}>
                    {name}
                  </option>
                ))}
              </select>
            </label>
            <TextField label="Working folder" name="cwd" value={cwd} placeholder="the agent's default" onInput={setCwd} />
            <TextField label="Model" name="model" value={model} placeholder="the engine's default" onInput={setModel} />
            <label>
              Permission mode
              <select name="permission_mode" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value)}>
                {PERMISSION_MODES.filter(
                  (m) => m !== 'bypassPermissions' || agents.find((a) => a.name === chosen)?.allows_bypass_permissions !== false,
                ).map((m) => (
                  <option key={m} value={m}>
                    {m}
                  </option>
                ))}
              </select>
            </label>
            <label
              class="check"
              title="The session works in its own git worktree of the folder's repository: removed at the end when clean, kept when not"
            >
              <input
                type="checkbox"
                name="worktree"
                checked={worktree}
                onChange={(e) => setWorktree((e.target as HTMLInputElement).checked)}
              />
              Own git worktree
            </label>
            {worktree && (
              <TextField label="Worktree branch" name="worktree_branch" value={branch} placeholder="tether/<session>" onInput={setBranch} />
            )}
            <button type="submit" class="primary" disabled={busy || !chosen}>
              Start session
            </button>
          </form>
        </section>
      ) : (
        <p class="muted" data-testid="cannot-start">
          Your sign-in lets you watch sessions; starting one needs a sign-in with the create permission.
        </p>
      )}
      <NeedsYou items={needs.filter((n) => matches(filter, n))} onOpen={(id) => props.onAttach(id, !may.control)} />
      <section aria-labelledby="sessions-h">
        <h2 id="sessions-h">Sessions</h2>
        <SessionFilters sessions={sessions} filter={filter} onChange={setFilter} />
        {sessions.length === 0 ? (
          <p class="muted">No session is running.</p>
        ) : (
          <ul class="cards" data-testid="sessions">
            {sessions
              .filter((s) => matches(filter, s))
              .map((s) => (
                <li key={s.id} class="card session-row" data-session={s.id}>
                  <div>
                    <strong data-testid="title">{s.title ?? 'Untitled session'}</strong> <span class="muted">on</span>{' '}
                    <strong>{s.agent}</strong>{' '}
                    <span class="mono small" title={s.id}>
                      {s.id.slice(0, 8)}
                    </span>{' '}
                    <span class="mono small">{s.options.cwd ?? ''}</span>
                    {s.pending_prompts > 0 && (
                      <span class="badge" title="prompts waiting for an answer">
                        {s.pending_prompts} waiting
                      </span>
                    )}
                    <div class="muted small">
                      {stateLabel(s.state)}
                      {s.agent_away_since && (
                        <span data-testid="agent-away">
                          {' '}
                          (agent away since {since(s.agent_away_since)}
                          {s.queued_inputs ? `, ${s.queued_inputs} prompt${s.queued_inputs === 1 ? '' : 's'} queued` : ''})
                        </span>
                      )}{' '}
                      · owner{' '}
                      <span data-testid="owner" title={s.owner}>
                        {s.owner_name ?? s.owner}
                      </span>{' '}
                      · started {since(s.created_at)} ·{' '}
                      {s.clients.length ? `here: ${s.clients.map((c) => `${c.principal} (${c.role})`).join(', ')}` : 'nobody attached'}
                    </div>
                  </div>
                  <div class="row-actions">
                    {may.control && s.state !== 'ended' && (
                      <button type="button" onClick={() => props.onAttach(s.id, false)} aria-label={`Open session ${s.id} as a controller`}>
                        Open
                      </button>
                    )}
                    <button type="button" onClick={() => props.onAttach(s.id, true)} aria-label={`Watch session ${s.id} read-only`}>
                      Watch
                    </button>
                  </div>
                </li>
              ))}
          </ul>
        )}
      </section>
      <TeamUsage conn={props.conn} />
    </main>
  );
}
