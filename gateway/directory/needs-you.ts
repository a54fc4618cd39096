import type { InboxItem } from '../../core/protocol/inbox.js';
import type { Principal } from '../door/principal.js';
import type { Session } from '../session/session.js';

/**
 * What waits for `p` among `sessions` (those of this gateway they may see): each prompt or
 * question they may answer (a viewer's token answers none), and each session they own that
 * ended (while the gateway still lists it) or whose agent is away. Not ordered: the caller
 * merges the fleet's parts and orders them once (core/protocol/inbox.ts, newestFirst).
 */
export function needsYou(p: Principal, sessions: Session[], nameOf: (sub: string) => string | undefined): InboxItem[] {
  const items: InboxItem[] = [];
  for (const s of sessions) {
    const title = s.title;
    const ownerName = nameOf(s.owner);
    const base = {
      session_id: s.id,
      agent: s.agent,
      owner: s.owner,
      ...(ownerName === undefined ? {} : { owner_name: ownerName }),
      ...(title === undefined ? {} : { title }),
    };
    for (const w of s.waitingFor(p))
      items.push({ ...base, kind: w.kind, at: w.at, request_id: w.requestId, ...(w.tool === undefined ? {} : { tool: w.tool }) });
    if (s.owner !== p.sub) continue;
    const ended = s.endedAt;
    const away = s.agentAwaySince;
    if (ended !== undefined) items.push({ ...base, kind: 'ended', at: ended });
    else if (away !== undefined) items.push({ ...base, kind: 'agent_lost', at: away });
  }
  return items;
}
