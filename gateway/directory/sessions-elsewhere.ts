import type {
  AgentDescriptor,
  AgentInfo,
  ParamsOf,
  ResultOf,
  SessionCall,
  SessionCallParams,
  SessionInfo,
} from '../../core/protocol/methods.js';
import type { Principal } from '../door/principal.js';
import type { InboxItem } from '../../core/protocol/inbox.js';
import type { Member } from '../session/session.js';

/** A client of this gateway whose session is held elsewhere: it can be cut so it resumes at the session's new home. */
export interface ProxiedClient extends Member {
  cut(reason: string): void;
}

/**
 * Sessions held by other gateways of a cluster (gateway/cluster/), as the routing core sees
 * them. Absent on a gateway that is not in a cluster: then nothing here changes anything.
 */
export interface SessionsElsewhere {
  /**
   * Forwards a call about a session this gateway does not hold to the gateway that does;
   * undefined when no gateway of the cluster holds it (the caller answers NOT_FOUND as before).
   */
  forward<M extends SessionCall>(
    method: M,
    params: SessionCallParams<M>,
    client: ProxiedClient,
    p: Principal,
  ): Promise<ResultOf<M>> | undefined;
  /**
   * Creates a session on an agent connected to another gateway, attaching `client` to it;
   * resolves undefined when no other gateway has that agent (the local create waits for it as before).
   */
  create(params: ParamsOf<'session.create'>, client: ProxiedClient, p: Principal): Promise<ResultOf<'session.create'> | undefined>;
  /** The gateway holding the session when it is another one and `p` may see the session; else undefined. */
  holderOf(sessionId: string, p: Principal): string | undefined;
  /** A client of this gateway left (closed its connection) while attached to a session held elsewhere. */
  left(sessionId: string, client: ProxiedClient, p: Principal): void;
  /** The fleet's sessions this principal may see: `local` (this gateway's) and the other gateways'. */
  listSessions(p: Principal, local: SessionInfo[]): Promise<SessionInfo[]>;
  /** What waits for this principal across the fleet: `local` (this gateway's) and the other gateways' (gateway/directory/needs-you.ts). */
  listNeeds(p: Principal, local: InboxItem[]): Promise<InboxItem[]>;
  /** The fleet's agents this principal may see. */
  listAgents(p: Principal, local: AgentInfo[]): Promise<AgentInfo[]>;
  /**
   * Before an agent's hello is answered here: sessions it still runs that another gateway
   * held are brought here (history, pending prompts, roles) so this gateway becomes their home.
   */
  beforeAgent(agent: AgentDescriptor): Promise<void>;
}
