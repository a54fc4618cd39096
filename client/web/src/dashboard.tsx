/** Agents and sessions, refreshed every few seconds; start a session, open or watch one. */
import { useEffect, useState } from 'preact/hooks';
import type { Connection } from './connection';
import { useStore } from './store';
import type { SessionInfo } from './session';
import { stateLabel } from './wording';

/** How often the lists refresh while the dashboard shows. */
const REFRESH_MS = 2_000;

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
  const [engine, setEngine] = useState('');
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    let stop = false;
    const load = async () => {
      try {
        const [a, s] = await Promise.all([props.conn.request('agents.list'), allSessions(props.conn)]);
        if (stop) return;
        setAgents(a.agents);
        setSessions(s);
      } catch {
        // The banner says when the link is down; the next round tries again.
      }
    };
    void load();
    const t = setInterval(load, REFRESH_MS);
    return () => {
      stop = true;
      clearInterval(t);
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
            <label>
              Working folder
              <input
                name="cwd"
                value={cwd}
                placeholder="the agent's default"
                onInput={(e) => setCwd((e.target as HTMLInputElement).value)}
              />
            </label>
            <label>
              Model
              <input
                name="model"
                value={model}
                placeholder="the engine's default"
                onInput={(e) => setModel((e.target as HTMLInputElement).value)}
              />
            </label>
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
      <section aria-labelledby="sessions-h">
        <h2 id="sessions-h">Sessions</h2>
        {sessions.length === 0 ? (
          <p class="muted">No session is running.</p>
        ) : (
          <ul class="cards" data-testid="sessions">
            {sessions.map((s) => (
              <li key={s.id} class="card session-row" data-session={s.id}>
                <div>
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
                    · owner {s.owner} · started {since(s.created_at)} ·{' '}
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
    </main>
  );
}
