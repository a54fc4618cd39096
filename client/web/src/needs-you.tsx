/** The dashboard's "Needs you": what waits for this person across the fleet (inbox.list), newest first. */

/** One item of inbox.list (core/protocol/inbox.ts). */
export interface InboxItem {
  kind: 'permission' | 'question' | 'ended' | 'agent_lost';
  session_id: string;
  agent: string;
  owner: string;
  owner_name?: string;
  title?: string;
  gateway?: string;
  at: string;
  request_id?: string;
  tool?: string;
}

function what(i: InboxItem): string {
  if (i.kind === 'permission') return `wants to use ${i.tool ?? 'a tool'}`;
  if (i.kind === 'question') return 'asks you a question';
  if (i.kind === 'ended') return 'ended';
  return 'lost its agent';
}

export function NeedsYou(props: { items: InboxItem[]; onOpen: (sessionId: string) => void }) {
  return (
    <section aria-labelledby="needs-h">
      <h2 id="needs-h">Needs you</h2>
      {props.items.length === 0 ? (
        <p class="muted" data-testid="needs-none">
          Nothing waits for you.
        </p>
      ) : (
        <ul class="cards" data-testid="needs-you">
          {props.items.map((i) => (
            <li
              key={`${i.session_id}/${i.request_id ?? i.kind}`}
              class="card needs-row"
              data-needs-session={i.session_id}
              data-kind={i.kind}
            >
              <div>
                <strong>{i.title ?? 'Untitled session'}</strong> <span class="muted">on</span> <strong>{i.agent}</strong>{' '}
                <span class={i.kind === 'permission' || i.kind === 'question' ? 'badge' : 'muted'}>{what(i)}</span>
                <div class="muted small">
                  since {new Date(i.at).toLocaleString()} · owner <span title={i.owner}>{i.owner_name ?? i.owner}</span>
                  {i.gateway && ` · gateway ${i.gateway}`}
                </div>
              </div>
              <div class="row-actions">
                <button type="button" onClick={() => props.onOpen(i.session_id)} aria-label={`Open session ${i.session_id}`}>
                  Open
                </button>
              </div>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
