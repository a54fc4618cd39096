import type { FolderQuery, FolderResult } from '../../core/protocol/folder-view.js';
import { readInFolder } from './file-read.js';
import type { FolderScope } from './folder-paths.js';
import { folderDiff, folderLog, folderStatus } from './git-view.js';

/**
 * Answers one `agent.folder` query for a session's folder: the one entry the agent calls.
 * Read-only; every path stays inside `scope` (agent/folder-view/folder-paths.ts) and git runs
 * only through agent/folder-view/git-run.ts.
 */
export function viewFolder(scope: FolderScope, query: FolderQuery): Promise<FolderResult> {
  switch (query.view) {
    case 'status':
      return folderStatus(scope);
    case 'diff':
      return folderDiff(scope, { path: query.path, base: query.base, stat: query.stat, maxBytes: query.max_bytes });
    case 'log':
      return folderLog(scope, query.limit);
    case 'file':
      return Promise.resolve().then(() => readInFolder(scope, query.path, query.max_bytes));
  }
}
