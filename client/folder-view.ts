import { TetherError } from '../core/errors.js';
import type { FolderQuery, FolderResultOf } from '../core/protocol/folder-view.js';
import type { RpcPeer } from '../core/rpc/peer.js';

/** How long a client waits for a folder read: the gateway's own wait for the agent, and a little. */
export const FOLDER_READ_TIMEOUT_MS = 65_000;

/**
 * One `session.folder` read, typed by its view: a session needs no attachment for it (the
 * terminal's `tether diff` and `tether files` read without joining). Rejects with the
 * gateway's or agent's TetherError (e.g. PERMISSION_DENIED for a path leading out).
 */
export async function readFolder<Q extends FolderQuery>(peer: RpcPeer, sessionId: string, query: Q): Promise<FolderResultOf<Q['view']>> {
  const result = await peer.request('session.folder', { session_id: sessionId, query }, { timeoutMs: FOLDER_READ_TIMEOUT_MS });
  if (result.view !== query.view) throw new TetherError('INTERNAL', `asked for the folder's ${query.view}, got ${result.view}`);
  return result as FolderResultOf<Q['view']>;
}
