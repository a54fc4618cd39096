import { TetherError } from '../../core/errors.js';
import type { FolderQuery, FolderResult } from '../../core/protocol/folder-view.js';
import type { Session } from '../session/session.js';
import type { SessionDirectory } from './session-directory.js';

/**
 * How long the agent has to answer one folder read: its git calls are bounded each
 * (agent/folder-view/git-run.ts); a diff with untracked files makes several.
 */
export const FOLDER_ANSWER_MS = 60_000;

/**
 * session.folder: a read of the session's folder, asked of the agent that runs it. Whoever may
 * see the session may read it (viewers too: it changes nothing); the agent keeps the read
 * inside the folder and its `--session-root`s. Not audited (who viewed which diff is not kept).
 */
export async function readSessionFolder(dir: SessionDirectory, session: Session, query: FolderQuery): Promise<FolderResult> {
  if (session.ended) throw new TetherError('FAILED_PRECONDITION', `session ${session.id} has ended: its folder is no longer read`);
  const agent = dir.agent(session.agent);
  if (!agent || session.agentAwaySince !== undefined)
    throw new TetherError('UNAVAILABLE', `agent "${session.agent}" of session ${session.id} is not connected`);
  return agent.peer.request('agent.folder', { session_id: session.id, query }, { timeoutMs: FOLDER_ANSWER_MS });
}
