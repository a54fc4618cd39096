import type { Logger } from '../../core/logging.js';
import type { SpawnPolicy } from '../../core/policy/hook.js';
import type { SessionOptions } from '../../core/protocol/session-options.js';
import type { Session } from '../session/session.js';
import type { AgentLink } from './agent-link.js';

/** What resuming needs of the directory. */
export interface ResumeDeps {
  /** The policy's hook and folders for engines on this agent (as at create). */
  spawnPolicy(agent: string): SpawnPolicy;
  /** Whether `link` is still the agent's live link (a link that dropped meanwhile binds nothing). */
  isCurrent(link: AgentLink): boolean;
  log: Logger;
}

/**
 * The options of an engine that continues a session: `resume` names the transcript (none: a
 * fresh engine), and the agent's own initialize replaces the client's, which went to the old one.
 */
export function resumedOptions(options: SessionOptions, engineSessionId: string | undefined): SessionOptions {
  const { client_initialize: _dropped, ...rest } = options;
  return engineSessionId === undefined ? rest : { ...rest, resume: engineSessionId };
}

/**
 * An agent came back (same identity) without the engine of a session it ran: its process
 * restarted, or its machine did. Asks it to start a new engine on the session's transcript
 * (`--resume <engine session id>`, same folder, same options) continuing the session's
 * numbering; once it runs, the session binds it (Session.engineResumed). A transcript that
 * cannot be resumed (deleted, another machine) ends the session with the engine's own words.
 * If the link drops meanwhile, nothing is ended: the agent's next hello lists the new engine.
 */
export function resumeEngine(link: AgentLink, s: Session, deps: ResumeDeps): void {
  if (!deps.isCurrent(link) || s.currentState !== 'agent-lost') return; // ended, or bound, meanwhile
  const c = s.continuation();
  const options = resumedOptions(s.options, c.engineSessionId);
  const log = deps.log.child({ sessionId: s.id, agent: link.name });
  log.info(
    { engineSessionId: c.engineSessionId, nextSeq: c.nextSeq, lastInputSeq: c.lastInputSeq },
    'agent came back without the engine; resuming it',
  );
  link.spawn(s.id, s.engine, options, deps.spawnPolicy(link.name), { next_seq: c.nextSeq, last_input_seq: c.lastInputSeq }).then(
    () => {
      if (deps.isCurrent(link)) s.engineResumed(link);
    },
    (err: Error) => {
      if (!deps.isCurrent(link) || s.ended) return; // the agent went away again: the session waits for it, bounded as before
      log.warn({ err: err.message }, 'the engine could not be resumed; ending the session');
      s.resumeFailed(err.message);
    },
  );
}
